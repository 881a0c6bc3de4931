"""``Reconciler.apply_now``: a dead gateway's group replaces applied ahead of the sync (magw.reconcile.shortcut),
over the fake node driver."""

from __future__ import annotations

import attrs

from magw.desired.node.ids import nexthop_id
from magw.desired.state import DesiredState, GroupMember, Nexthop, NexthopGroup, Route
from magw.reconcile.changeset import Op
from magw.reconcile.shortcut import failover_ops
from tests.support.reconcile_harness import BASE, NH, A, FlakyDriver, Harness, N, fresh_driver, netlink_of

NH2 = Nexthop(id=nexthop_id(A("240.18.0.8"), inter_cluster=False), via=A("240.18.0.8"), dev="vx-submariner")
BOTH = NexthopGroup(id=0x63000001, members=(GroupMember(id=NH.id), GroupMember(id=NH2.id)), type="resilient",
                    buckets=32, idle_timer=60)  # fmt: skip
ONLY2 = attrs.evolve(BOTH, members=(GroupMember(id=NH2.id),))
ROUTE = Route(table=254, dst=N("10.2.0.0/16"), metric=100, src=A("10.1.3.1"), nhid=BOTH.id)
BEFORE = attrs.evolve(BASE, nexthops=(NH, NH2), groups=(BOTH,), routes=(ROUTE,))
AFTER = attrs.evolve(BEFORE, groups=(ONLY2,))


def gw1_dies(known: DesiredState) -> tuple[Op, ...]:
    return failover_ops(known, {NH.via}, {NH.via})


def group_in_kernel(driver: FlakyDriver) -> NexthopGroup:
    (group,) = netlink_of(driver).observe().groups
    return group


async def test_the_replace_reaches_the_kernel_at_once_and_the_sync_then_finds_it_done() -> None:
    driver = fresh_driver()
    h = Harness(driver, desired=BEFORE)
    await h.start()
    result = h.rec.apply_now(gw1_dies)
    assert result is not None
    assert [(op.verb, op.obj) for op in result.applied] == [("replace", ONLY2)]
    assert group_in_kernel(driver) == ONLY2  # before any sync ran
    h.desired = AFTER  # what the planner makes of the same health change
    h.rec.mark_dirty("health", urgent=True)
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert (h.results[1].full, h.results[1].applied) == (False, ())
    assert driver.sent(ONLY2) == 1


async def test_a_verdict_withdrawn_before_the_sync_is_put_back_by_the_sync() -> None:
    """gw1 answers again before the sync runs: the plan is the one before, and the known state says what the
    kernel holds (gw1 out), so the sync puts gw1 back."""
    driver = fresh_driver()
    h = Harness(driver, desired=BEFORE)
    await h.start()
    assert h.rec.apply_now(gw1_dies) is not None
    h.rec.mark_dirty("health", urgent=True)
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert [op.obj for op in h.results[1].applied] == [BOTH]
    assert group_in_kernel(driver) == BOTH


async def test_nothing_is_applied_before_the_first_sync_or_when_nothing_holds_the_dead_gateway() -> None:
    driver = fresh_driver()
    h = Harness(driver, desired=BEFORE)
    assert h.rec.apply_now(gw1_dies) is None  # nothing known yet: the first sync does it all
    assert driver.applied_batches == []
    await h.start()
    assert h.rec.apply_now(lambda known: failover_ops(known, {A("240.18.0.99")}, set())) is None
    await h.stop()
    assert len(driver.applied_batches) == 1  # the start's


async def test_a_failed_replace_makes_the_next_sync_observe() -> None:
    driver = fresh_driver(fails=lambda op: op.kind == "groups" and op.verb == "replace")
    h = Harness(driver, desired=BEFORE)
    await h.start()
    observes = driver.observes
    result = h.rec.apply_now(gw1_dies)
    assert result is not None and [f.op.obj for f in result.failed] == [ONLY2]
    driver.fails = lambda op: False
    h.desired = AFTER
    h.rec.mark_dirty("health", urgent=True)
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert h.results[1].full is True and driver.observes == observes + 1
    assert group_in_kernel(driver) == ONLY2


async def test_a_driver_given_is_used_instead_of_the_wrapper() -> None:
    """The route agent passes the driver under its WireGuard cable's: the wrapper sees nothing of the replace."""
    driver = fresh_driver()
    h = Harness(driver, desired=BEFORE)
    await h.start()
    batches = len(driver.applied_batches)
    result = h.rec.apply_now(gw1_dies, driver=driver.inner)
    await h.stop()
    assert result is not None and len(result.applied) == 1
    assert len(driver.applied_batches) == batches
    assert group_in_kernel(driver) == ONLY2


async def test_the_replace_is_counted_in_the_metrics_as_a_shortcut() -> None:
    driver = fresh_driver()
    h = Harness(driver, desired=BEFORE)
    await h.start()
    before = h.registry.get_sample_value("magw_nexthop_group_replaces_total") or 0
    assert h.rec.apply_now(gw1_dies) is not None
    await h.stop()
    assert h.registry.get_sample_value("magw_nexthop_group_replaces_total") == before + 1
    assert h.registry.get_sample_value("magw_nexthop_group_sync_seconds_count", {"mode": "shortcut"}) == 1
    assert h.sample("magw_reconciler_changes_total", kind="groups", verb="replace") == 1  # the start created it
