"""The failover shortcut: a dead gateway's group replaces made from the known state (magw.reconcile.shortcut).

The property test's oracle is the planner itself with the gateway down: whatever the shortcut applies must send
every destination to the very gateways the plan made with the new health sends it to.
"""

from __future__ import annotations

from ipaddress import IPv4Address

import attrs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from magw.desired.node.planner import plan
from magw.desired.state import DesiredState, GroupMember, Nexthop, NexthopGroup, Route
from magw.model import Health, Snapshot
from magw.model.vtep import vtep_ip
from magw.reconcile.known import carry_out
from magw.reconcile.shortcut import failover_ops
from tests.support.strategies import snapshot_and_node

A = IPv4Address
GW1, GW2, GW3 = A("241.18.0.11"), A("241.18.0.12"), A("241.18.0.13")
NHS = tuple(Nexthop(id=0x61000000 + i, via=via, dev="vxlan-tunnel") for i, via in enumerate((GW1, GW2, GW3), 1))


def group(gid: int, *nexthops: Nexthop, resilient: bool = True) -> NexthopGroup:
    members = tuple(GroupMember(id=n.id) for n in nexthops)
    if resilient:
        return NexthopGroup(id=gid, members=members, type="resilient", buckets=128, idle_timer=120)
    return NexthopGroup(id=gid, members=members)


def test_the_dead_gateways_nexthop_leaves_every_group_that_holds_it_and_nothing_else_changes() -> None:
    g1, g2, g3 = group(0x63000001, *NHS), group(0x63000002, NHS[0], NHS[1]), group(0x63000003, NHS[1], NHS[2])
    known = DesiredState(nexthops=NHS, groups=(g3, g1, g2))
    ops = failover_ops(known, {GW1}, {GW1})
    assert [(op.verb, op.kind, op.old) for op in ops] == [("replace", "groups", g1), ("replace", "groups", g2)]
    assert ops[0].obj == NexthopGroup(
        id=g1.id, members=(GroupMember(id=NHS[1].id), GroupMember(id=NHS[2].id)), type="resilient", buckets=128,
        idle_timer=120,
    )  # fmt: skip
    assert ops[1].obj == attrs.evolve(g2, members=(GroupMember(id=NHS[1].id),))


def test_a_group_left_empty_or_holding_a_doubtful_peer_is_left_to_the_plan() -> None:
    """Only gw1 in it: the plan's fail static keeps it. gw3 down (or limited to some clusters) in it: the group may
    be in fail static (every candidate kept because none was usable); what it becomes only the plan knows."""
    alone, static = group(0x62000001, NHS[0], resilient=False), group(0x62000002, *NHS)
    fine = group(0x62000003, *NHS[:2])
    known = DesiredState(nexthops=NHS, groups=(alone, static, fine))
    ops = failover_ops(known, {GW1}, {GW1, GW3})
    assert [op.obj for op in ops] == [attrs.evolve(fine, members=(GroupMember(id=NHS[1].id),))]


def test_no_dead_peer_or_none_of_ours_changes_nothing() -> None:
    known = DesiredState(nexthops=NHS, groups=(group(0x63000001, *NHS),))
    assert failover_ops(known, set(), {GW1}) == ()
    assert failover_ops(known, {A("241.18.0.99")}, {A("241.18.0.99")}) == ()


def _paths(state: DesiredState, route: Route) -> frozenset[int]:
    """The nexthop ids a route sends to: its group's members, its nexthop, or its inline paths' gateways."""
    groups = {g.id: g for g in state.groups}
    if route.nhid is not None:
        g = groups.get(route.nhid)
        return frozenset(m.id for m in g.members) if g is not None else frozenset({route.nhid})
    return frozenset(hash((p.via, p.dev)) for p in route.nexthops)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), drawn=snapshot_and_node(max_gateways=3))
def test_what_the_shortcut_applies_sends_every_route_where_the_plan_with_the_gateway_down_does(
    data: st.DataObject, drawn: tuple[Snapshot, str]
) -> None:
    snapshot, node = drawn
    up = sorted({e.hostname for e in snapshot.endpoints} - set(snapshot.health.down))
    assume(up)
    victim = data.draw(st.sampled_from(up))
    try:
        known = plan(snapshot, node)
    except ValueError:
        assume(False)
        return
    after = attrs.evolve(snapshot, health=Health(down=snapshot.health.down | {victim}, reach=snapshot.health.reach))
    expected = plan(after, node)

    def addresses(hostnames: frozenset[str]) -> set[IPv4Address]:
        ips = [e.private_ip for e in snapshot.endpoints if e.hostname in hostnames]
        return {vtep_ip(ip, inter_cluster=x) for ip in ips for x in (True, False)}

    doubtful = after.health.down | {gw for gw, _ in after.health.reach}
    ops = failover_ops(known, addresses(frozenset({victim})), addresses(doubtful))
    shortcut = carry_out(known, ops)
    replaced = {op.obj.key for op in ops}
    expected_routes = {r.key: r for r in expected.routes}
    for route in known.routes:
        if route.nhid not in replaced:
            continue
        assert route.key in expected_routes, f"{route.key} is gone from the plan, the shortcut kept it"
        assert _paths(shortcut, route) == _paths(expected, expected_routes[route.key]), route.key
