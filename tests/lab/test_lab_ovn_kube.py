"""Kernel test: ``magw lab up --cni ovn --control-plane kube`` (docs/lab.md, "--cni ovn").

OVN-Kubernetes' datapath with real packets, every daemon fed by the clusters' API server emulators instead of the
file broker: the route agents publish their Nodes' CNI address from ``ovn-k8s-mp0``, and the worker's route agent
hosts its cluster's OVN syncer, which follows the agent's own source. The oracles: the management port's address
read with ``ip``, the Node objects read back from the emulator, the reroute policy read with ``ovn-nbctl``, and
the lab's verifier (its packets and traces) for the paths.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.planes import kube
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.ovn import ovn_dir
from magw.lab.planes.ovn_nodes import ovs_missing
from magw.lab.planes.ovn_servers import ovn_missing
from magw.lab.planes.ovn_topology import nbctl
from magw.lab.spec.layout import layout
from magw.sources.kube.mapping import CNI_IP_ANNOTATION
from tests.support.cli import MagwCli
from tests.support.labkit import NOTHING_LEFT, leftovers, mgmt_address, ovn_join_address, unique_name

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ovn,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

TOPOLOGY = """\
clusters:
  - {id: east, gateways: 2, workers: 1, pods_per_node: 1}
  - {id: west, gateways: 1, workers: 1, pods_per_node: 1}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, magw_cli: MagwCli) -> Iterator[LabState]:
    reason = ovn_missing() or ovs_missing()
    if reason:
        pytest.skip(reason)
    name = unique_name()
    topo = tmp_path_factory.mktemp("ovnkube") / "lab.yaml"
    topo.write_text(TOPOLOGY)
    try:
        up = magw_cli("lab", "up", "--name", name, "--cni", "ovn", "--control-plane", "kube", "--topology", str(topo),
                      "--timeout", "90")  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        st = state.read(name)
        assert st is not None and st.kube and st.ovn
        yield st
    finally:
        magw_cli("lab", "down", "--name", name)


def _policy_hops(st: LabState) -> list[str]:
    return nbctl(ovn_dir(st, "east"), "--bare", "--columns=nexthops", "list", "Logical_Router_Policy").split()


def test_each_node_publishes_its_management_ports_address(lab: LabState) -> None:
    """No cni0 on an OVN node: the Node's ``submariner.io/cniIfaceIp`` is ``ovn-k8s-mp0``'s address, as ``ip``
    reads it in the node's namespace."""
    for node in layout(lab.name, lab.topology).nodes:
        mp0 = mgmt_address(node.namespace)
        (obj,) = (o for o in kube.cluster_api(lab, node.cluster).http().list("Node")
                  if o["metadata"]["name"] == node.name)  # fmt: skip
        assert obj["metadata"]["annotations"][CNI_IP_ANNOTATION] == mp0, node.name
        assert not any(a["ifname"] == "cni0" for a in json.loads(subprocess.run(
            ["ip", "-n", node.namespace, "-j", "link", "show"], capture_output=True, text=True, timeout=10,
            check=True).stdout))  # fmt: skip


def test_verify_passes_with_the_api_servers_as_the_source(lab: LabState, magw_cli: MagwCli) -> None:
    """Traces and packets, every pod to every remote pod and service, through both of east's gateways."""
    out = magw_cli("lab", "verify", "--name", lab.name)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, out.stdout + out.stderr
    assert lines[-1].startswith("== ") and lines[-1].endswith(" OK") and "FAILED" not in lines[-1]
    ecmp = next(line for line in lines if "trace  ecmp" in line and "east -> west" in line)
    assert "2 bucket(s) reach" in ecmp and "(expected east-gw1, east-gw2)" in ecmp, ecmp


def test_a_failed_gateway_leaves_the_ecmp_set_and_returns(lab: LabState, magw_cli: MagwCli) -> None:
    """east-gw2's links go down: the worker's route agent, which reads the API server, calls it down and its hosted
    syncer takes its router out of the reroute policy; recovered, it is back."""
    gw2_join = ovn_join_address(lab, "east", "east-gw2")
    assert gw2_join in _policy_hops(lab)
    out = magw_cli("lab", "fail", "--name", lab.name, "east-gw2")
    assert out.returncode == 0, out.stderr
    try:
        deadline = time.monotonic() + 20
        while gw2_join in (hops := _policy_hops(lab)):
            assert time.monotonic() < deadline, f"east-gw2 stayed in the policy: {hops}"
            time.sleep(0.2)
        assert hops, "the policy lost every next hop"
    finally:
        out = magw_cli("lab", "recover", "--name", lab.name, "east-gw2")
        assert out.returncode == 0, out.stderr
    deadline = time.monotonic() + 60
    while gw2_join not in (hops := _policy_hops(lab)):
        assert time.monotonic() < deadline, f"east-gw2 did not come back into the policy: {hops}"
        time.sleep(0.5)


def test_down_leaves_nothing(lab: LabState, magw_cli: MagwCli) -> None:
    kinds = {p.kind for p in lab.processes}
    assert {"kubeemu", "ovn-controller", "ovsdb-sb", "route-agent"} <= kinds, kinds
    out = magw_cli("lab", "down", "--name", lab.name)
    assert out.returncode == 0, out.stderr
    assert leftovers(lab.name, lab.processes) == NOTHING_LEFT
    assert not lab.dir.exists()
