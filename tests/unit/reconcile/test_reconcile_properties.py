"""Properties of planner + diff + fake together: any plan installs cleanly, any plan moves to any other, foreign
state survives.

Each namespace also holds foreign state (a LAN device, nexthops outside our id range, routes of other protocols,
a rule at another priority) and the CNI address our routes use as ``src``.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magw.desired.node.planner import plan
from magw.desired.state import DesiredState, GroupMember, Nexthop, NexthopGroup, Route, RouteNexthop, Rule
from magw.drivers.netlink.constants import RTPROT_MAGW
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.model import Health, Snapshot
from magw.reconcile.diff import diff
from tests.support.strategies import snapshot_and_node, snapshots

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LAN_GW = IPv4Address("192.168.1.1")


def fresh_fake() -> FakeNetlink:
    """A namespace holding only foreign state (none of it magw's)."""
    fake = FakeNetlink()
    fake.add_foreign_address("eth0", "192.168.1.10/24")
    fake.add_foreign(Nexthop(id=7, via=LAN_GW, dev="eth0"))
    fake.add_foreign(NexthopGroup(id=8, members=(GroupMember(id=7),)))
    lan = (RouteNexthop(via=LAN_GW, dev="eth0"),)
    fake.add_foreign(Route(table=254, dst=IPv4Network("0.0.0.0/0"), metric=0, nexthops=lan))
    fake.add_foreign(Route(table=100, dst=IPv4Network("192.168.50.0/24"), metric=100, nhid=8), protocol=4)
    fake.add_foreign(Route(table=200, dst=IPv4Network("10.0.0.0/8"), metric=100, nexthops=lan), protocol=RTPROT_MAGW)
    fake.add_foreign(Rule(priority=32000, table=200))
    assert fake.observe() == DesiredState()
    return fake


def give_cni_ip(fake: FakeNetlink, snapshot: Snapshot, node: str) -> None:
    """The node's CNI address, which routes use as src (the CNI owns it, not us)."""
    fake.add_foreign_address("cni0", f"{snapshot.node(node).cni_ip}/24")


def foreign_lines(fake: FakeNetlink) -> set[str]:
    """Lines of dump() that are not ours: everything in a fresh fake, as it reads there."""
    return set(fake.dump().splitlines())


FOREIGN = foreign_lines(fresh_fake())


def netlink_part(state: DesiredState) -> DesiredState:
    return attrs.evolve(state, nft=None)


@SETTINGS
@given(case=snapshot_and_node())
def test_any_plan_installs_without_failure_and_then_diffs_empty(case: tuple[Snapshot, str]) -> None:
    """(a) diff(plan, empty) applies to a fresh namespace with no failure; then diff(plan, observe()) is empty."""
    snapshot, node = case
    desired = plan(snapshot, node)
    fake = fresh_fake()
    give_cni_ip(fake, snapshot, node)
    result = fake.apply(diff(desired, DesiredState()))
    assert [f.describe() for f in result.failed] == []
    assert fake.observe() == netlink_part(desired)
    assert diff(desired, fake.observe()).ops == ()
    assert foreign_lines(fake) >= FOREIGN


@SETTINGS
@given(first=snapshot_and_node(), second=snapshot_and_node())
def test_any_plan_moves_to_any_other_in_one_changeset(
    first: tuple[Snapshot, str], second: tuple[Snapshot, str]
) -> None:
    """(b) From a namespace holding plan(s1), diff(plan(s2), observe()) applies with no failure and converges."""
    (s1, n1), (s2, n2) = first, second
    fake = fresh_fake()
    give_cni_ip(fake, s1, n1)
    assert fake.apply(diff(plan(s1, n1), fake.observe())).failed == ()
    give_cni_ip(fake, s2, n2)
    target = plan(s2, n2)
    result = fake.apply(diff(target, fake.observe()))
    assert [f.describe() for f in result.failed] == []
    assert fake.observe() == netlink_part(target)
    assert foreign_lines(fake) >= FOREIGN


@st.composite
def same_node_changed(draw: st.DrawFn) -> tuple[Snapshot, Snapshot, str]:
    """One node under two snapshots that differ in config (strategy, resilient parameters, MTU) and health."""
    snapshot, node = draw(snapshot_and_node())
    hostnames = sorted(e.hostname for e in snapshot.endpoints)
    down = draw(st.lists(st.sampled_from(hostnames), unique=True))
    changed = attrs.evolve(snapshot, config=draw(snapshots()).config, health=Health(down=frozenset(down)))
    return snapshot, changed, node


@SETTINGS
@given(case=same_node_changed())
def test_config_and_health_changes_converge_in_one_changeset(case: tuple[Snapshot, Snapshot, str]) -> None:
    """(b) for the common case: the same node under a new strategy, group parameters, MTU or health."""
    before, after, node = case
    fake = fresh_fake()
    give_cni_ip(fake, before, node)
    assert fake.apply(diff(plan(before, node), fake.observe())).failed == ()
    target = plan(after, node)
    result = fake.apply(diff(target, fake.observe()))
    assert [f.describe() for f in result.failed] == []
    assert fake.observe() == netlink_part(target)
    assert foreign_lines(fake) >= FOREIGN


@SETTINGS
@given(case=snapshot_and_node())
def test_cleanup_removes_all_of_ours_and_nothing_else(case: tuple[Snapshot, str]) -> None:
    """(c) After install and cleanup (diff against nothing), the namespace reads exactly as before, foreign included."""
    snapshot, node = case
    fake = fresh_fake()
    give_cni_ip(fake, snapshot, node)
    before = fake.dump()
    assert fake.apply(diff(plan(snapshot, node), fake.observe())).failed == ()
    assert fake.apply(diff(DesiredState(), fake.observe())).failed == ()
    assert fake.observe() == DesiredState()
    assert fake.dump() == before
