"""The node side of ``cni: ovn`` (magw.desired.ovn.node through ``plan``): workers, gateways, with and without
Globalnet. Expected objects are written out by hand from docs/ovn-node.md, not computed by the planner's helpers.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network

import attrs
import pytest

from magw.desired.node.planner import plan
from magw.desired.render import render_text
from magw.desired.state import MAIN_TABLE, Address, DesiredState, Route, RouteNexthop, Rule
from magw.drivers.fake_node import fake_node_driver
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.model import Cni
from magw.reconcile.diff import diff
from magw.snapshot.load import dump_snapshot, parse_snapshot_text
from tests.support.ovn_node_world import NODES, snapshot

N = IPv4Network
A = IPv4Address

def mp0(dst: str, src: str = "10.1.3.2", via: str = "10.1.3.1") -> Route:
    return Route(
        table=150,
        dst=N(dst),
        metric=100,
        src=A(src),
        nexthops=(RouteNexthop(via=A(via), dev="ovn-k8s-mp0"),),
    )


def sub0(dst: str) -> Route:
    return Route(
        table=149,
        dst=N(dst),
        metric=100,
        nexthops=(RouteNexthop(via=A("169.254.254.9"), dev="ovn-k8s-sub0"),),
    )


SUB0_ADDRESS = Address(dev="ovn-k8s-sub0", address=IPv4Interface("169.254.254.10/29"))
HOST_RULE = Rule(priority=150, table=150)
INGRESS_RULE = Rule(priority=149, table=149, iif="vxlan-tunnel")


def test_worker_routes_remote_cidrs_through_ovn_in_table_150_only() -> None:
    state = plan(snapshot(), "e-w1")
    assert state.routes == (mp0("10.2.0.0/16"), mp0("100.2.0.0/16"))
    assert state.rules == (HOST_RULE,)
    assert (state.nexthops, state.groups) == ((), ())
    assert not [r for r in state.routes if r.table == MAIN_TABLE]


def test_worker_keeps_the_probe_mesh_but_routes_nothing_over_it() -> None:
    """vx-submariner stays (a route agent hosting the OVN syncer probes the gateways over it), unused by routes."""
    state = plan(snapshot(), "e-w1")
    assert [lk.name for lk in state.links] == ["vx-submariner"]
    assert {n.ip for n in state.neighbors} == {A("240.18.0.6"), A("240.18.0.8")}
    assert all(h.dev == "ovn-k8s-mp0" for r in state.routes for h in r.nexthops)


def test_worker_with_globalnet_routes_the_remote_global_cidrs_and_never_a_default() -> None:
    """Submariner issue 1982's path (host network to remote clusters through OVN) exists with Globalnet too;
    it carries the remote global CIDRs, and table 150 never holds a default route (our rule is from all)."""
    state = plan(snapshot(globalnet=True), "e-w1")
    assert state.routes == (mp0("242.2.0.0/24"),)
    assert state.rules == (HOST_RULE,)
    assert N("0.0.0.0/0") not in {r.dst for r in state.routes}


def test_management_next_hop_given_explicitly() -> None:
    state = plan(snapshot(), "e-w1", ovn_mgmt_nexthop=A("10.1.3.254"))
    assert state.routes == (mp0("10.2.0.0/16", via="10.1.3.254"), mp0("100.2.0.0/16", via="10.1.3.254"))


def test_management_next_hop_is_not_guessed_from_a_first_address() -> None:
    s = attrs.evolve(snapshot(), nodes=(*NODES[:2], attrs.evolve(NODES[2], cni_ip=A("10.1.3.1"))))
    with pytest.raises(ValueError, match=r"cni_ip 10\.1\.3\.1: .*--ovn-mgmt-nexthop"):
        plan(s, "e-w1")
    assert plan(s, "e-w1", ovn_mgmt_nexthop=A("10.1.3.2")).routes[0].nexthops[0].via == A("10.1.3.2")


@pytest.mark.parametrize("globalnet", [False, True])
def test_gateway_is_the_generic_gateway_plus_sub0_and_table_149(globalnet: bool) -> None:
    """Everything of the generic gateway stays (tunnels, table 100, Globalnet nft); OVN adds ovn-k8s-sub0's
    address, table 149 toward submariner_up_lrp for the LOCAL pod and service CIDRs (Submariner issue 1983:
    not the global CIDR, the gateway has translated already), and rule 149 for traffic from vxlan-tunnel."""
    generic = plan(snapshot(cni=Cni.GENERIC, globalnet=globalnet), "e-gw1")
    ovn = plan(snapshot(globalnet=globalnet), "e-gw1")
    for kind in ("links", "neighbors", "fdb", "nexthops", "groups"):
        assert ovn.of_kind(kind) == generic.of_kind(kind)
    assert set(ovn.addresses) - set(generic.addresses) == {SUB0_ADDRESS}
    assert set(generic.addresses) <= set(ovn.addresses)
    assert set(ovn.routes) - set(generic.routes) == {sub0("10.1.0.0/16"), sub0("100.1.0.0/16")}
    assert set(generic.routes) <= set(ovn.routes)
    assert ovn.rules == (Rule(priority=100, table=100), INGRESS_RULE)


def _nft_lines(state: DesiredState) -> list[str]:
    text = render_text(state)
    return [line.strip() for line in text[text.index("table ip magw") :].splitlines()]


@pytest.mark.parametrize("globalnet", [False, True])
def test_gateway_nft_adds_only_a_null_snat_for_remote_sources_into_ovn(globalnet: bool) -> None:
    generic = _nft_lines(plan(snapshot(cni=Cni.GENERIC, globalnet=globalnet), "e-gw1"))
    ovn = _nft_lines(plan(snapshot(globalnet=globalnet), "e-gw1"))
    added = [line for line in ovn if line not in generic]
    assert len(added) == 1
    assert 'ip saddr @remote_cidrs oifname "ovn-k8s-sub0" snat to ip saddr' in added[0]
    assert [line for line in generic if line not in ovn] == []


def test_globalnet_gateway_snat_sits_in_the_postrouting_base_chain() -> None:
    """Submariner issue 1981 (the jump into the Globalnet egress chain missing): our Globalnet SNAT rules are
    in the nat base chain hooked at postrouting, so there is no jump that could be missing."""
    lines = _nft_lines(plan(snapshot(globalnet=True), "e-gw1"))
    start = lines.index(next(line for line in lines if line.startswith("chain postrouting ")))
    assert "type nat hook postrouting" in lines[start + 1]
    chain = lines[start : lines.index("}", start)]
    assert any(line.startswith("meta mark & 786432 == 786432 snat to") for line in chain), chain


def test_generic_cni_plans_no_ovn_object() -> None:
    for name in ("e-gw1", "e-w1"):
        state = plan(snapshot(cni=Cni.GENERIC), name)
        assert {r.table for r in state.routes} <= {MAIN_TABLE, 100}
        assert {r.priority for r in state.rules} <= {100}
        assert "ovn-k8s-sub0" not in {a.dev for a in state.addresses}


@pytest.mark.parametrize("name", ["e-gw1", "e-w1"])
def test_fake_node_holds_the_ovn_plan(name: str) -> None:
    """The plan applies to the fake node that has OVN-K's devices (ovn-k8s-mp0 with the cni_ip, ovn-k8s-sub0)
    and reads back equal: the fake owns addresses on ovn-k8s-sub0 and accepts routes through foreign devices."""
    netlink = FakeNetlink()
    node = next(n for n in NODES if n.name == name)
    netlink.add_foreign_address("ovn-k8s-mp0", IPv4Interface(f"{node.cni_ip}/24"))
    netlink.add_foreign_link("ovn-k8s-sub0")
    driver = fake_node_driver(netlink=netlink)
    desired = plan(snapshot(), name)
    result = driver.apply(diff(desired, driver.observe()))
    assert [f.describe() for f in result.failed] == []
    assert driver.observe() == desired
    assert "rule 149: from all iif vxlan-tunnel lookup 149" in netlink.dump() or name == "e-w1"


def test_snapshot_round_trips_cni() -> None:
    s = snapshot()
    assert parse_snapshot_text(dump_snapshot(s)) == s
    assert "cni: ovn" in dump_snapshot(s)
    assert "cni:" not in dump_snapshot(snapshot(cni=Cni.GENERIC))


def test_kube_source_reads_the_cni_from_submariners_network_plugin() -> None:
    from magw.sources.kube import mapping

    (doc,) = mapping.config_docs({"spec": {"networkPlugin": "OVNKubernetes"}}, None)
    assert doc.fields["cni"] == "ovn"
    for spec in ({}, {"networkPlugin": "generic"}, {"networkPlugin": "calico"}):
        (doc,) = mapping.config_docs({"spec": spec}, None)
        assert "cni" not in doc.fields
