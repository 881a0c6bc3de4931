"""A gateway node added to a running ``--cni ovn`` lab becomes an OVN node, carries traffic through OVN, and leaves
nothing behind (``magw lab add-gateway``/``remove-gateway``; ``magw.lab.planes.ovn_grow``).

Kernel and OVN test: one lab (east and west, a gateway and a worker each, one pod per node), unique name, always
removed. The oracles are read independently of the lab code: the NB and SB with ``ovn-nbctl``/``ovn-sbctl``, the
new gateway's WAN counters with ``ip``, its Open vSwitch with ``ovs-vsctl``, and real TCP connections between pods
(OVN's userspace datapath does not hash UDP ports into its ECMP choice, so UDP flows of one pod pair all take one
gateway).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from magw.lab.build import netns, state
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.ovn import ovn_dir
from magw.lab.planes.ovn_nodes import ovs_dir, ovs_missing
from magw.lab.planes.ovn_servers import ovn_missing
from magw.lab.planes.ovn_topology import nbctl, sbctl
from magw.lab.spec import naming
from magw.lab.spec.layout import ECHO_PORT, LabLayout, layout
from magw.lab.spec.topology import parse_topology
from magw.lab.verify.connectivity import udp_flows
from tests.support.cli import MagwCli
from tests.support.labkit import find_ovn_router, ovn_join_address, poll, running_lab

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ovn,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

CONNS = 16  # TCP connections, each hashed onto one of two east gateways: all on one is a 1 in 32,768 chance


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    reason = ovn_missing() or ovs_missing()
    if reason:
        pytest.skip(reason)
    spec = {"gateways": 1, "workers": 1, "pods_per_node": 1}
    topo = parse_topology({"clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})
    with running_lab(topo, daemons=True, cni="ovn") as built:
        yield built


def nb_rows(st: LabState, table: str, column: str = "name") -> set[str]:
    return set(nbctl(ovn_dir(st, "east"), "--bare", f"--columns={column}", "list", table).split())


def chassis(st: LabState) -> dict[str, str]:
    """SB chassis name -> hostname, read with ovn-sbctl."""
    out = sbctl(ovn_dir(st, "east"), "--bare", "--columns=name,hostname", "list", "Chassis").split()
    return dict(zip(out[::2], out[1::2], strict=True))


def policy_names(st: LabState, gateway: str) -> bool:
    """True when a reroute policy of east's NB has ``gateway``'s join address among its next hops."""
    hops = nbctl(ovn_dir(st, "east"), "--bare", "--columns=nexthops", "list", "Logical_Router_Policy").split()
    return ovn_join_address(st, "east", gateway) in hops


def wan_tx(namespace: str) -> int:
    stats = netns.link_stats(namespace, naming.WAN_IF)
    assert stats is not None, f"{namespace} has no {naming.WAN_IF}"
    return stats["tx_packets"]


def tcp_through_both(lab: LabLayout, st: LabState, namespace: str) -> None:
    """16 TCP connections from east's worker pod to west's: all answered, and some left by ``namespace``'s WAN."""
    east, west = lab.cluster("east"), lab.cluster("west")
    pod, server = east.pods_of("east-w1")[0], west.pods_of("west-w1")[0]
    before = wan_tx(namespace)
    summary = udp_flows(pod.namespace, server.ip, ECHO_PORT, flows=CONNS, packets=10, proto="tcp")
    assert summary["received"] == summary["sent"] == CONNS * 10, summary
    assert wan_tx(namespace) - before >= 10, "no connection left through the added gateway"


def test_an_added_gateway_is_an_ovn_node_carries_connections_and_leaves_nothing(
    lab: tuple[LabLayout, LabState], magw_cli: MagwCli
) -> None:
    before, st = lab
    nodes_before, routers_before = nb_rows(st, "Logical_Switch"), nb_rows(st, "Logical_Router")
    for attempt in ("first", "again"):  # a node made again (same name, same addresses) after its removal
        done = magw_cli("lab", "add-gateway", "--cluster", "east", "--name", st.name, timeout=240)
        assert done.returncode == 0 and "east-gw2 is a gateway of east" in done.stdout, (attempt, done)
        grown = layout(st.name, state.require(st.name).topology)
        new = grown.node("east-gw2")
        # OVN-K's rows for the node: its switch, its gateway router pinned to its chassis, which its own
        # ovn-controller registered with its hostname
        assert "east-gw2" in nb_rows(st, "Logical_Switch") - nodes_before, attempt  # (and the syncer's own)
        assert "GR_east-gw2" in nb_rows(st, "Logical_Router"), attempt
        pinned = nbctl(ovn_dir(st, "east"), "get", "Logical_Router", "GR_east-gw2", "options:chassis").strip()
        assert pinned.strip('"') == "chassis-east-gw2"
        assert chassis(st).get("chassis-east-gw2") == "east-gw2", chassis(st)
        # the syncer gave it a router of its own, and the worker's reroute policy names its join address
        assert find_ovn_router(st, "east", "east-gw2"), attempt
        poll("the reroute policy names east-gw2's join address", lambda: policy_names(st, "east-gw2"))
        # its route agent made br-submariner in its Open vSwitch (OVN mode on a gateway)
        bridges = subprocess.run(["ovs-vsctl", f"--db=unix:{ovs_dir(st, new) / 'db.sock'}", "list-br"],
                                 capture_output=True, text=True, timeout=30, check=True).stdout.split()  # fmt: skip
        assert {"br-int", "br-phy", "br-submariner"} <= set(bridges), bridges
        tcp_through_both(grown, st, new.namespace)

        out = magw_cli.lab("remove-gateway", "east-gw2", "--name", st.name)
        assert "its NB rows and SB chassis deleted" in out and "failed" not in out, out
        after = state.require(st.name)
        assert after.topology == st.topology
        assert not [r for r in after.processes if r.owner == "east-gw2"]
        assert not netns.exists(new.namespace) and not ovs_dir(st, new).exists()
        assert nb_rows(st, "Logical_Switch") == nodes_before and nb_rows(st, "Logical_Router") == routers_before
        assert "chassis-east-gw2" not in chassis(st)
        assert not find_ovn_router(st, "east", "east-gw2")
        pod, server = before.cluster("east").pods_of("east-w1")[0], before.cluster("west").pods_of("west-w1")[0]
        summary = udp_flows(pod.namespace, server.ip, ECHO_PORT, flows=CONNS, packets=5, proto="tcp")
        assert summary["received"] == summary["sent"] == CONNS * 5, (attempt, summary)
