"""The egress gateway lab on the Kubernetes control plane: ``magw lab up --control-plane kube --topology
examples/lab-egress-gateway.yaml``.

The egress controller and agents run with ``--source kube`` against the cluster's API server emulator, the egress
cluster's route agents with ``--egress``; the EgressConfig and EgressVIPs are objects there (deploy/crds). The
oracle is the example's text (``tests/lab/test_lab_egress.py``'s table): what the outside server *saw*. The holder
the kernel shows must be the one the EgressVIP object's status names (the controller wrote it from the agents'
reports), and an unbind and a bind through the controller's API land in the object's ``spec.bindings``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.kube import cluster_api
from tests.lab.test_lab_egress import EXAMPLE, EXPECTED, OUTSIDE, api, seen
from tests.support.cli import MagwCli
from tests.support.labkit import unique_name

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]


@pytest.fixture(scope="module")
def lab(magw_cli: MagwCli) -> Iterator[LabState]:
    name = unique_name()
    try:
        up = magw_cli("lab", "up", "--name", name, "--topology", str(EXAMPLE), "--control-plane", "kube",
                      "--timeout", "120", timeout=300)  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        st = state.read(name)
        assert st is not None and st.kube
        yield st
    finally:
        magw_cli("lab", "down", "--name", name)


def _vips(lab: LabState) -> dict[str, dict[str, object]]:
    api_server = cluster_api(lab, "east")
    return {o["metadata"]["name"]: o for o in api_server.http().list("EgressVIP", api_server.namespace)}


@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_each_bound_pod_leaves_as_its_vip_and_unbound_pods_do_not(lab: LabState, proto: str) -> None:
    got = {ns: seen(lab, ns, f"{proto}:{OUTSIDE}:8080") for ns in EXPECTED}
    assert got == EXPECTED


def test_the_egressvip_status_names_the_node_that_holds_it(lab: LabState, magw_cli: MagwCli) -> None:
    deadline = time.monotonic() + 30
    while True:
        doc = json.loads(magw_cli("lab", "status", "--name", lab.name, "--json").stdout)
        vips = {v["name"]: v for v in doc["egress"]["vips"]}
        kernel = {n: v["kernel"] for n, v in vips.items()}
        reported = {n: (v["status"] or {}).get("holder") for n, v in vips.items()}
        if all(len(k) == 1 for k in kernel.values()) and reported == {n: k[0] for n, k in kernel.items()}:
            break
        assert time.monotonic() < deadline, (kernel, reported)
        time.sleep(0.5)
    objects = _vips(lab)
    assert {n: o["status"]["holder"] for n, o in objects.items()} == reported  # type: ignore[index]


def test_an_unbind_and_a_bind_through_the_api_land_in_the_egressvip_object(lab: LabState) -> None:
    web = {"vip": "web", "namespace": "blog", "service": "web"}
    status, body = api(lab, "POST", "/vip", {"action": "unbind", **web})
    assert status == 200, body
    try:
        assert _vips(lab)["web"]["spec"].get("bindings") in (None, [])  # type: ignore[union-attr]
    finally:
        status, body = api(lab, "POST", "/vip", {"action": "bind", **web})
        assert status == 200, body
    assert _vips(lab)["web"]["spec"]["bindings"] == [{"namespace": "blog", "service": "web"}]  # type: ignore[index]
