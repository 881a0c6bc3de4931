"""The pure OVN planner: the seed's topology, one gateway router per active gateway, sticky slots, failover.

Expected names, addresses and MACs are written out here from the seed (DESIGN.md, OVN section), not taken
from magw.desired.ovn.topology.
"""

from __future__ import annotations

import pytest

from magw.desired.ovn.planner import OvnInputs, OvnPlanError, plan_ovn
from magw.desired.ovn.rows import Policy, Router, RouterPort, StaticRoute, SwitchPort, router_options
from magw.desired.ovn.slots import assign_slots
from magw.desired.ovn.topology import remote_set_name
from magw.reconcile.ovndiff import ovn_diff
from tests.support.ovn_snapshots import chassis_of, east_snapshot

GWS = ("gw1", "gw2", "gw3")


def _plan(snapshot, previous=None, chassis=None):  # type: ignore[no-untyped-def]
    return plan_ovn(snapshot, OvnInputs(chassis=chassis or chassis_of(GWS), previous_slots=previous or {}))


def _by_name(rows):  # type: ignore[no-untyped-def]
    return {r.name: r for r in rows}


def test_single_gateway_is_the_seed_topology() -> None:
    plan = _plan(east_snapshot(gateways=("gw1",), multi_active=False))
    st = plan.state
    assert [r.name for r in st.routers] == ["submariner_router"]
    router = st.routers[0]
    assert (router.chassis, router.lb_group) == ("chassis-gw1", "clusterLBGroup")
    assert {s.name for s in st.switches} == {"submariner_join", "submariner_gateway"}
    ports = _by_name(st.router_ports)
    assert ports["submariner_j_lrp"] == RouterPort(
        name="submariner_j_lrp", router="submariner_router", mac="00:60:2f:10:01:03", networks=("169.254.254.1/29",)
    )
    assert ports["ovn_cluster_subm_lrp"].router == "ovn_cluster_router"
    assert ports["ovn_cluster_subm_lrp"].networks == ("169.254.254.2/29",)
    assert ports["submariner_up_lrp"].networks == ("169.254.254.9/29",)
    localnet = [p for p in st.switch_ports if p.type == "localnet"]
    assert [(p.switch, dict(p.options)) for p in localnet] == [
        ("submariner_gateway", {"network_name": "submariner_gateway"})
    ]
    assert set(st.routes) == {
        StaticRoute(router="submariner_router", prefix=p, nexthop="169.254.254.10", output_port="submariner_up_lrp")
        for p in ("10.200.0.0/16", "10.201.0.0/16")
    } | {
        StaticRoute(router="submariner_router", prefix=p, nexthop="169.254.254.2", output_port="submariner_j_lrp")
        for p in ("10.128.0.0/14", "10.96.0.0/16")
    }
    assert st.policies == (
        Policy(
            router="ovn_cluster_router",
            priority=20000,
            match="ip4.dst == $submariner_remote_west",
            nexthops=("169.254.254.1",),
        ),
    )
    assert [(a.name, a.addresses) for a in st.address_sets] == [
        ("submariner_remote_west", ("10.200.0.0/16", "10.201.0.0/16"))
    ]
    assert (plan.needs_routers, plan.needs_lb_groups, plan.needs_chassis) == (
        ("ovn_cluster_router",),
        ("clusterLBGroup",),
        ("chassis-gw1",),
    )


def test_every_router_peer_port_names_an_existing_router_port() -> None:
    st = _plan(east_snapshot()).state
    lrps = {p.name for p in st.router_ports}
    peers = [p for p in st.switch_ports if p.type == "router"]
    assert len(peers) == len(lrps)
    assert {dict(p.options)["router-port"] for p in peers} == lrps


def test_multi_active_one_router_per_gateway_and_an_ecmp_set() -> None:
    st = _plan(east_snapshot()).state
    routers = _by_name(st.routers)
    assert set(routers) == {"submariner_router", "submariner_router_2", "submariner_router_3"}
    assert {r.gateway: (r.slot, r.chassis) for r in routers.values()} == {
        "gw1": (1, "chassis-gw1"),
        "gw2": (2, "chassis-gw2"),
        "gw3": (3, "chassis-gw3"),
    }
    join = {p.router: p.networks for p in st.router_ports if p.name.startswith("submariner_j_lrp")}
    assert join == {
        "submariner_router": ("169.254.254.1/29",),
        "submariner_router_2": ("169.254.254.3/29",),
        "submariner_router_3": ("169.254.254.4/29",),
    }
    assert [p.nexthops for p in st.policies] == [("169.254.254.1", "169.254.254.3", "169.254.254.4")]
    macs = [p.mac for p in st.router_ports]
    assert len(set(macs)) == len(macs)


def test_a_gateway_going_down_changes_only_the_policies_nexthops() -> None:
    before = _plan(east_snapshot(north=True)).state
    after = _plan(east_snapshot(north=True, down=("gw2",)), previous={"gw1": 1, "gw2": 2, "gw3": 3}).state
    changes = ovn_diff(after, before)
    assert not changes.creates and not changes.deletes
    assert {type(u.new) for u in changes.updates} == {Policy}
    assert len(changes.updates) == 2  # one policy per remote cluster
    assert all("169.254.254.3" not in u.new.nexthops for u in changes.updates)  # type: ignore[union-attr]


def test_reach_removes_a_gateway_from_one_cluster_only() -> None:
    st = _plan(east_snapshot(north=True, reach=[("gw3", ["west"])])).state
    hops = {p.match: p.nexthops for p in st.policies}
    assert hops["ip4.dst == $submariner_remote_west"] == ("169.254.254.1", "169.254.254.3", "169.254.254.4")
    assert hops["ip4.dst == $submariner_remote_north"] == ("169.254.254.1", "169.254.254.3")


def test_with_every_gateway_down_the_policy_keeps_them_all() -> None:
    st = _plan(east_snapshot(down=GWS)).state
    assert [p.nexthops for p in st.policies] == [("169.254.254.1", "169.254.254.3", "169.254.254.4")]


def test_slots_are_sticky_when_gateways_join_and_leave() -> None:
    assert assign_slots(["gw1", "gw2", "gw3"], {"gw2": 1, "gw3": 3}) == {"gw2": 1, "gw3": 3, "gw1": 2}
    # gw1 leaves: the others keep their rows exactly.
    before = _plan(east_snapshot()).state
    after = _plan(east_snapshot(gateways=("gw2", "gw3")), previous={"gw1": 1, "gw2": 2, "gw3": 3}).state
    changes = ovn_diff(after, before)
    assert not changes.creates
    assert {u.new.key for u in changes.updates} == {("ovn_cluster_router", 20000, "ip4.dst == $submariner_remote_west")}
    assert {r.key for r in changes.deletes if isinstance(r, Router)} == {"submariner_router"}
    assert all(not getattr(r, "name", "").endswith(("_2", "_3")) for r in changes.deletes)


def test_single_gateway_failover_repins_the_one_router() -> None:
    before = _plan(east_snapshot(gateways=("gw1", "gw2"), multi_active=False)).state
    after = _plan(east_snapshot(gateways=("gw1", "gw2"), multi_active=False, down=("gw1",)), previous={"gw1": 1}).state
    changes = ovn_diff(after, before)
    assert not changes.creates and not changes.deletes
    assert [(u.old.chassis, u.new.chassis) for u in changes.updates] == [  # type: ignore[union-attr]
        ("chassis-gw1", "chassis-gw2")
    ]


def test_globalnet_routes_remote_global_cidrs_and_local_cluster_cidrs() -> None:
    st = _plan(east_snapshot(globalnet=True)).state
    assert [a.addresses for a in st.address_sets] == [("242.1.0.0/16",)]
    slot1 = {(r.prefix, r.nexthop) for r in st.routes if r.router == "submariner_router"}
    assert slot1 == {
        ("242.1.0.0/16", "169.254.254.10"),
        ("10.128.0.0/14", "169.254.254.2"),
        ("10.96.0.0/16", "169.254.254.2"),
    }


def test_a_usable_gateway_without_a_chassis_is_an_error_naming_it() -> None:
    with pytest.raises(OvnPlanError, match=r"no SB chassis has hostname gw3 .*known: gw1, gw2"):
        _plan(east_snapshot(), chassis=chassis_of(("gw1", "gw2")))


def test_a_dead_gateway_whose_chassis_is_gone_gets_no_router() -> None:
    st = _plan(east_snapshot(down=("gw3",)), chassis=chassis_of(("gw1", "gw2"))).state
    assert {r.gateway for r in st.routers} == {"gw1", "gw2"}


def test_more_gateways_than_join_addresses_is_an_error() -> None:
    gws = tuple(f"gw{i}" for i in range(1, 7))
    with pytest.raises(OvnPlanError, match=r"6 active gateways.*169\.254\.254\.0/29.*5"):
        _plan(east_snapshot(gateways=gws), chassis=chassis_of(gws))


def test_a_local_cluster_missing_from_the_snapshot_is_an_error() -> None:
    import attrs

    snap = attrs.evolve(east_snapshot(), local_cluster="nowhere")
    with pytest.raises(OvnPlanError, match="nowhere"):
        _plan(snap)


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [("west", "submariner_remote_west"), ("cluster.b", "submariner_remote_cluster.b")],
)
def test_address_set_names_are_the_cluster_id_when_ovn_allows_it(cluster: str, expected: str) -> None:
    assert remote_set_name(cluster) == expected


def test_address_set_names_of_ids_differing_in_forbidden_characters_differ() -> None:
    a, b = remote_set_name("a-b"), remote_set_name("a_b")
    assert a != b and a.startswith("submariner_remote_a_b_")
    assert all(ch.isalnum() or ch in "_." for ch in a)


def test_plans_are_deterministic() -> None:
    assert _plan(east_snapshot()) == _plan(east_snapshot())


def test_switch_port_fields() -> None:
    ports = _by_name(_plan(east_snapshot(gateways=("gw1",))).state.switch_ports)
    assert ports["submariner_j_lsp"] == SwitchPort(
        name="submariner_j_lsp",
        switch="submariner_join",
        type="router",
        addresses=("router",),
        options={"router-port": "submariner_j_lrp"},
    )


def test_several_active_gateways_snat_what_their_load_balancers_dnat() -> None:
    """A remote client's connection to a service is DNATed by the gateway router it entered, and the backend's
    reply is hashed over every router by the reroute policy: with several active gateways every router SNATs
    balanced connections to its own join address (lb_force_snat_ip=router_ip), so the reply finds the router
    that holds the DNAT. One active gateway (the seed's topology) does not need it and keeps the seed's rows."""
    multi = _plan(east_snapshot()).state.routers
    assert [r.lb_snat for r in multi] == [True, True, True]
    single = _plan(east_snapshot(gateways=("gw1",), multi_active=False)).state.routers
    assert [r.lb_snat for r in single] == [False]
    no_group = plan_ovn(east_snapshot(), OvnInputs(chassis=chassis_of(GWS), lb_group=None)).state.routers
    assert [r.lb_snat for r in no_group] == [False, False, False]  # no load balancer, nothing to SNAT


def test_router_options_hold_the_chassis_and_the_lb_snat() -> None:
    assert router_options(Router(name="r", chassis="c1", lb_snat=True)) == {
        "chassis": "c1",
        "lb_force_snat_ip": "router_ip",
    }
    assert router_options(Router(name="r", chassis="c1")) == {"chassis": "c1"}
    assert router_options(Router(name="r")) == {}
