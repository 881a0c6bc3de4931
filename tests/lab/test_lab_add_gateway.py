"""A gateway node added to a running lab carries traffic, and leaves without a trace (``magw lab add-gateway``,
``remove-gateway``; docs/lab.md, "Adding a gateway").

Kernel test: one lab (unique name, always removed). What the daemons did is read back with ``ip -json`` inside the
node namespaces and with the new gateway's own link counters; traffic is real (UDP flows between pods). Waits are
bounded polls.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Address

import pytest

from magw.lab.build import netns, state
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed, endpoint_file
from magw.lab.spec import naming
from magw.lab.spec.layout import ECHO_PORT, LabLayout, NodeLayout, layout
from magw.lab.spec.topology import parse_topology
from magw.lab.verify.connectivity import udp_flows
from magw.model.vtep import vtep_ip
from tests.support import netns as checker
from tests.support.cli import MagwCli
from tests.support.labkit import poll, running_lab

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="magw-route-agent / magw-gateway are not installed (pip -e .)"),
]

FLOWS = 16  # each picks one of two east gateways by its hash: all 16 on one is a 1 in 32,768 chance


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    """east and west, one gateway and one worker each, one pod per node."""
    spec = {"gateways": 1, "workers": 1, "pods_per_node": 1}
    topo = parse_topology({"clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})
    with running_lab(topo, daemons=True) as built:
        yield built


def vteps_in_groups(node: NodeLayout) -> set[IPv4Address]:
    """The gateways (VTEPs) every multipath route of ``node`` spreads over, read with ``ip -json route``."""
    routes = checker.ip_json(node.namespace, "route", "show", "table", "all")
    return {IPv4Address(hop["gateway"]) for r in routes for hop in r.get("nexthops", []) if "gateway" in hop}


def wan_tx(node: NodeLayout) -> int:
    stats = netns.link_stats(node.namespace, naming.WAN_IF)
    assert stats is not None, f"{node.name} has no {naming.WAN_IF}"
    return stats["tx_packets"]


def test_an_added_gateway_carries_flows_and_its_removal_leaves_nothing(
    lab: tuple[LabLayout, LabState], magw_cli: MagwCli
) -> None:
    before, st = lab
    out = magw_cli.lab("add-gateway", "--cluster", "east", "--name", st.name)
    assert "east-gw2 is a gateway of east" in out, out
    grown = layout(st.name, state.require(st.name).topology)
    east, west = grown.cluster("east"), grown.cluster("west")
    new = grown.node("east-gw2")
    # laid out after the worker, with no pods: nothing of the lab as it was moved
    assert [n.name for n in east.nodes] == ["east-gw1", "east-w1", "east-gw2"]
    assert (new.node_ip, new.wan_ip, str(new.pod_subnet)) == (
        IPv4Address("172.17.0.12"), IPv4Address("198.18.0.12"), "10.1.3.0/24")  # fmt: skip
    assert not east.pods_of(new.name)
    assert all(grown.node(n.name) == n for n in before.nodes)
    assert netns.lo_alias(new.namespace) == naming.marker(st.name, st.token)
    assert endpoint_file(st.broker_dir, new).exists()
    # every east worker and every west gateway spreads over it (its VTEPs: inside east, and between clusters)
    poll("east-w1 and west-gw1 route over east-gw2",
         lambda: vtep_ip(new.node_ip, inter_cluster=False) in vteps_in_groups(grown.node("east-w1"))
         and vtep_ip(new.node_ip, inter_cluster=True) in vteps_in_groups(grown.node("west-gw1")))  # fmt: skip
    # real flows from a pod on east's worker to a west pod: some leave through the new gateway's WAN link
    pod, server = east.pods_of("east-w1")[0], west.pods_of("west-w1")[0]
    sent_before = wan_tx(new)
    summary = udp_flows(pod.namespace, server.ip, ECHO_PORT, flows=FLOWS, packets=20)
    assert summary["received"] == summary["sent"] == FLOWS * 20, summary
    assert wan_tx(new) - sent_before >= 20, "no flow left through the added gateway"

    out = magw_cli.lab("remove-gateway", "east-gw2", "--name", st.name)
    assert "namespace" in out and "deleted" in out, out
    after = state.require(st.name)
    assert after.topology == before.topology
    assert new.namespace not in after.namespaces and not netns.exists(new.namespace)
    assert not [r for r in after.processes if r.owner == new.name]
    assert not endpoint_file(st.broker_dir, new).exists()
    assert not (st.broker_dir / f"node-east-{new.name}.yaml").exists()
    gone = {vtep_ip(new.node_ip, inter_cluster=False), vtep_ip(new.node_ip, inter_cluster=True)}
    poll("no node routes over east-gw2 any more", lambda: all(not gone & vteps_in_groups(n) for n in before.nodes))
    assert f"{new.pod_subnet}" not in checker.run(before.node("east-w1").namespace, "ip", "route").stdout
    summary = udp_flows(pod.namespace, server.ip, ECHO_PORT, flows=FLOWS, packets=5)
    assert summary["received"] == summary["sent"] == FLOWS * 5, summary


def test_add_and_remove_refuse_what_they_cannot_do(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """Bad input: exit 2, one line, and the lab as it was."""
    _, st = lab
    cases = [
        (("add-gateway", "--cluster", "north"), "'north' is not a cluster of the lab (clusters: east, west)"),
        (("remove-gateway", "east-gw1"), "'east-gw1' is not an added gateway (none was added)"),
        (("add-gateway", "--cluster", "east", "--name", "nosuchlab"), "no lab named 'nosuchlab'"),
    ]
    for args, said in cases:
        name = () if "--name" in args else ("--name", st.name)
        done = magw_cli("lab", *args, *name)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert state.require(st.name).topology == st.topology
