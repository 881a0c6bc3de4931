"""The reconciler loop over the fake node driver, with a fake clock (no timed assertions; pytest-asyncio tests)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from structlog.testing import capture_logs

from magw.desired.state import DesiredState, Route
from magw.drivers.fake_node import fake_node_driver
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.reconcile.changeset import ChangeSet, Op, key_text
from magw.reconcile.diff import diff
from magw.reconcile.driver import ApplyResult
from magw.reconcile.loop import Reconciler
from tests.support.reconcile_harness import (
    ADDR,
    BASE,
    LINK,
    NH,
    R1,
    R2,
    RESYNC,
    STALE,
    FlakyDriver,
    Harness,
    fresh_driver,
    netlink_of,
    route,
    sync_events,
)


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    with capture_logs() as captured:
        yield captured


async def test_start_is_a_full_sync_that_converges(logs: list[dict[str, Any]]) -> None:
    """At start the loop observes, diffs and applies everything; the fake then holds exactly the desired state."""
    driver = fresh_driver()
    h = Harness(driver)

    await h.start()
    await h.stop()
    assert driver.inner.observe() == BASE
    assert [(r.full, len(r.applied), r.failures) for r in h.results] == [(True, 5, ())]
    assert h.rec.status().converged is True
    assert [o.state for o in h.rec.status().objects] == ["done"] * 5
    (done,) = sync_events(logs)
    timed = ("took_ms", "plan_ms", "observe_ms", "diff_ms", "apply_ms", "record_ms")
    assert {k: v for k, v in done.items() if k not in timed} == {
        "event": "reconciler.sync_done",
        "log_level": "info",
        "name": "t",
        "full": True,
        "changes": 5,
        "failed": 0,
        "skipped": 0,
        "deferred": 0,
        "reasons": "start",
    }
    assert all(isinstance(done[k], float) for k in timed)
    # the phases in the order they ran, each within the whole
    assert [k for k in done if k in timed[1:]] == list(timed[1:])
    assert sum(done[k] for k in timed[1:]) >= done["took_ms"] * 0.5
    assert all(done[k] <= done["took_ms"] + 5 for k in timed[1:])
    assert [
        e["event"] for e in logs if e["event"].startswith("reconciler.") and e["event"] != "reconciler.sync_done"
    ] == [
        "reconciler.started",
        "reconciler.stopped",
    ]


async def test_ten_marks_coalesce_into_one_sync(logs: list[dict[str, Any]]) -> None:
    """Ten mark_dirty calls within the settle delay are served by ONE partial sync naming all reasons."""
    driver = fresh_driver()
    h = Harness(driver)

    await h.start()
    await h.idle()
    h.desired = attrs.evolve(BASE, routes=[R1, R2, STALE])
    for i in range(10):
        h.rec.mark_dirty(f"r{i}")
        await asyncio.sleep(0)
    await h.until(lambda: len(h.results) == 2)
    await h.idle()
    await h.stop()
    assert len(h.results) == 2
    second = h.results[1]
    assert second.full is False
    assert second.reasons == tuple(f"r{i}" for i in range(10))
    assert [op.describe() for op in second.applied if isinstance(op, Op)] == [f"create route {key_text(STALE.key)}"]
    assert driver.observes == 1  # the partial sync diffed against the known state
    assert [e["reasons"] for e in sync_events(logs)] == ["start", "r0,r1,r2,r3,r4,r5,r6,r7,r8,r9"]


async def test_an_urgent_mark_skips_the_settle_delay_and_a_plain_one_still_settles() -> None:
    """A health change (``urgent``) is served with the fake clock standing still: no settle delay. A plain mark
    afterwards waits in ``settling`` until the clock moves, as before."""
    h = Harness(fresh_driver())
    await h.start()
    await h.idle()
    h.desired = attrs.evolve(BASE, routes=[R1, R2, STALE])
    h.rec.mark_dirty("health", urgent=True)
    phases = []
    for _ in range(5000):  # event-loop turns, the clock never advanced
        phases.append(h.rec.phase)
        if len(h.results) == 2:
            break
        await asyncio.sleep(0.001 if h.rec.phase == "syncing" else 0)
    assert len(h.results) == 2 and h.results[1].reasons == ("health",)
    assert "settling" not in phases
    await h.idle()
    h.rec.mark_dirty("broker")
    for _ in range(50):
        await asyncio.sleep(0)
    assert h.rec.phase == "settling" and len(h.results) == 2
    await h.until(lambda: len(h.results) == 3)
    await h.stop()


def retry_at(h: Harness, key: str) -> float:
    (entry,) = [o for o in h.rec.status().objects if o.key == key]
    assert entry.retry_at is not None
    return entry.retry_at


async def test_failed_op_is_retried_with_capped_exponential_backoff(logs: list[dict[str, Any]]) -> None:
    """A failing route is retried after 1 s, 2 s, 4 s, 4 s (cap); a sync before its retry time leaves it out."""
    driver = fresh_driver(fails=lambda op: op.obj == R2)
    h = Harness(driver)
    key = "254 100.2.0.0/16 100"

    await h.start()
    assert [(o.kind, o.key, o.state, o.error, o.attempts) for o in h.rec.status().objects if o.state != "done"] == [
        ("routes", key, "error", "ENOBUFS: No buffer space available", 1)
    ]
    await h.idle()
    h.rec.mark_dirty("unrelated")
    await h.until(lambda: len(h.results) == 2)
    assert (h.results[-1].skipped, driver.sent(R2)) == (1, 1)
    for count in (3, 4, 5):
        await h.idle()
        h.clock.advance(retry_at(h, key) - h.clock.now())
        await h.until(lambda n=count: len(h.results) == n)
    await h.idle()
    driver.fails = lambda op: False
    h.clock.advance(retry_at(h, key) - h.clock.now())
    await h.until(lambda: len(h.results) == 6)
    await h.idle()
    await h.stop()
    failed = [e for e in logs if e["event"] == "reconciler.op_failed"]
    assert [(e["kind"], e["key"], e["verb"], e["attempt"], e["retry_in"]) for e in failed] == [
        ("routes", key, "create", 1, 1.0),
        ("routes", key, "create", 2, 2.0),
        ("routes", key, "create", 3, 4.0),
        ("routes", key, "create", 4, 4.0),
    ]
    assert driver.sent(R2) == 5
    assert [(r.full, r.reasons) for r in h.results] == [
        (True, ("start",)),
        (True, ("unrelated",)),  # the first sync after a failure is full
        (False, ("retry",)),
        (True, ("retry",)),
        (True, ("retry",)),
        (True, ("retry",)),
    ]
    assert driver.inner.observe() == BASE
    assert h.rec.status().converged is True


async def test_a_change_of_the_desired_object_clears_its_backoff() -> None:
    """While a route waits for its retry, a new desired value for it is tried at the next sync, not later."""
    driver = fresh_driver(fails=lambda op: op.obj == R2)
    h = Harness(driver)
    changed = route("100.2.0.0/16", src="10.1.3.9")

    await h.start()
    await h.idle()
    due = retry_at(h, "254 100.2.0.0/16 100")
    h.desired = attrs.evolve(BASE, routes=[R1, changed])
    h.rec.mark_dirty("snapshot")
    await h.until(lambda: len(h.results) == 2)
    assert h.clock.now() < due
    await h.stop()
    assert driver.sent(changed) == 1
    assert h.results[1].skipped == 0
    assert netlink_of(driver).get("routes", changed.key) == changed
    assert h.rec.status().converged is True


async def test_nothing_is_pruned_before_the_inputs_are_synced(logs: list[dict[str, Any]]) -> None:
    """A stale route of ours survives syncs while inputs_synced() is False; it goes once inputs are synced."""
    seed = fake_node_driver(netlink=FakeNetlink(check_prefsrc=False))
    seed.apply(ChangeSet(ops=tuple(Op(verb="create", kind=k, obj=o) for k, o in _base_ops(STALE))))
    driver = FlakyDriver(inner=seed)
    h = Harness(driver, synced=False)

    await h.start()
    assert netlink_of(driver).get("routes", STALE.key) == STALE
    pending = [(o.kind, o.key, o.state, o.verb) for o in h.rec.status().objects if o.state != "done"]
    assert pending == [("routes", "254 10.9.0.0/16 100", "pending", "delete")]
    await h.idle()
    h.synced = True
    h.rec.mark_dirty("inputs_synced")
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert h.results[0].deferred == 1
    assert [op.describe() for op in h.results[1].applied if isinstance(op, Op)] == [
        f"delete route {key_text(STALE.key)}"
    ]
    assert driver.inner.observe() == BASE
    assert [e["deferred"] for e in logs if e["event"] == "reconciler.prune_deferred"] == [1]


def _base_ops(*extra: Route) -> list[tuple[str, object]]:
    return [("links", LINK), ("addresses", ADDR), ("nexthops", NH), *(("routes", r) for r in extra)]


async def test_planner_without_state_means_no_sync(logs: list[dict[str, Any]]) -> None:
    """While the planner returns None (inputs not ready), nothing is observed or applied."""
    driver = fresh_driver()
    h = Harness(driver, desired=None)

    await h.start()
    await h.idle()
    h.desired = BASE
    h.rec.mark_dirty("snapshot")
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert [(r.planned, r.full) for r in h.results] == [(False, True), (True, True)]
    assert driver.observes == 1
    assert [e["event"] for e in logs if e["event"] == "reconciler.waiting_for_inputs"] == [
        "reconciler.waiting_for_inputs"
    ]
    assert driver.inner.observe() == BASE


async def test_periodic_resync_repairs_drift_that_a_partial_sync_cannot_see() -> None:
    """A route deleted behind our back stays missing after a partial sync and is restored by the resync."""
    driver = fresh_driver()
    h = Harness(driver)

    await h.start()
    await h.idle()
    assert netlink_of(driver).remove("routes", R1.key) is True
    h.rec.mark_dirty("unrelated")
    await h.until(lambda: len(h.results) == 2)
    assert netlink_of(driver).get("routes", R1.key) is None
    await h.idle()
    h.clock.advance(RESYNC)
    await h.until(lambda: len(h.results) == 3)
    await h.stop()
    assert [(r.full, r.reasons) for r in h.results] == [
        (True, ("start",)),
        (False, ("unrelated",)),
        (True, ("resync",)),
    ]
    assert [op.describe() for op in h.results[2].applied if isinstance(op, Op)] == [f"create route {key_text(R1.key)}"]
    assert driver.observes == 2  # no audit given: the start's and the resync's own, on the sync path
    assert driver.inner.observe() == BASE


async def test_link_replace_is_followed_by_a_full_sync() -> None:
    """After a link replace (which the kernel may do as delete + create) the loop observes again at once."""
    driver = fresh_driver()
    h = Harness(driver)

    await h.start()
    await h.idle()
    h.desired = attrs.evolve(BASE, links=[attrs.evolve(LINK, mtu=1400)])
    h.rec.mark_dirty("mtu")
    await h.until(lambda: len(h.results) == 3)
    await h.idle()
    await h.stop()
    assert [(r.full, r.reasons, len(r.applied)) for r in h.results] == [
        (True, ("start",), 5),
        (False, ("mtu",), 1),
        (True, ("link_changed",), 0),
    ]


async def test_metrics_count_syncs_changes_errors_and_owned_objects() -> None:
    """Prometheus samples after one full sync with one failure and one partial sync."""
    driver = fresh_driver(fails=lambda op: op.obj == R2)
    h = Harness(driver)

    await h.start()
    await h.idle()
    h.desired = attrs.evolve(BASE, routes=[R1, R2, STALE])
    h.rec.mark_dirty("more")
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert h.sample("magw_reconciler_syncs_total", mode="full") == 2.0  # start, then full after the failure
    assert h.sample("magw_reconciler_sync_duration_seconds_count", mode="full") == 2.0
    assert h.sample("magw_reconciler_sync_duration_seconds_count", mode="partial") is None
    assert h.sample("magw_reconciler_changes_total", kind="routes", verb="create") == 2.0
    assert h.sample("magw_reconciler_changes_total", kind="links", verb="create") == 1.0
    assert h.sample("magw_reconciler_errors_total", kind="routes") == 1.0
    assert h.sample("magw_reconciler_skipped_total", reason="backoff") == 1.0
    assert h.sample("magw_reconciler_objects", kind="routes") == 2.0
    assert h.sample("magw_reconciler_objects", kind="links") == 1.0
    assert h.sample("magw_reconciler_objects", kind="nft") == 0.0


async def test_a_driver_that_raises_is_retried_with_backoff(logs: list[dict[str, Any]]) -> None:
    """observe() raising is logged, counted, and retried after the backoff; the loop survives."""
    driver = fresh_driver(broken="netlink socket closed")
    h = Harness(driver)

    await h.start()
    await h.idle()
    driver.broken = None
    h.clock.advance(1.0)
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert [(r.error, r.reasons) for r in h.results] == [
        ("RuntimeError('netlink socket closed')", ("start",)),
        (None, ("retry",)),
    ]
    failed = [e for e in logs if e["event"] == "reconciler.sync_failed"]
    assert [(e["error"], e["attempt"], e["retry_in"]) for e in failed] == [
        ("RuntimeError('netlink socket closed')", 1, 1.0)
    ]
    assert h.sample("magw_reconciler_errors_total", kind="sync") == 1.0
    assert driver.inner.observe() == BASE


async def test_cancellation_waits_for_the_driver_call_in_progress(logs: list[dict[str, Any]]) -> None:
    """Cancelling run() during an apply ends the loop only after that apply finished: no driver call is left behind."""
    gate = threading.Event()
    entered = threading.Event()
    finished: list[bool] = []
    inner = fresh_driver()

    class SlowDriver:
        def observe(self) -> DesiredState:
            return inner.observe()

        def apply(self, changes: ChangeSet) -> ApplyResult:
            entered.set()
            gate.wait(30)
            result = inner.apply(changes)
            finished.append(True)
            return result

    rec = Reconciler(SlowDriver(), lambda: BASE, resync_period=RESYNC, name="slow", settle=0.0)

    task = asyncio.create_task(rec.run())
    while not entered.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    threading.Thread(target=gate.set).start()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [True]
    assert rec.phase == "stopped"
    assert [e["event"] for e in logs if e["event"] in ("reconciler.started", "reconciler.stopped")] == [
        "reconciler.started",
        "reconciler.stopped",
    ]


def test_bad_parameters_are_one_line_errors() -> None:
    """A non-positive resync period or a backoff cap below its base names the parameter."""
    with pytest.raises(ValueError, match=r"^resync_period: must be > 0 seconds, got 0$"):
        Reconciler(fresh_driver(), lambda: None, resync_period=0)
    with pytest.raises(ValueError, match=r"^backoff_cap: must be >= backoff_base \(2\.0\), got 1\.0$"):
        Reconciler(fresh_driver(), lambda: None, resync_period=1, backoff_base=2.0, backoff_cap=1.0)


async def test_mark_dirty_from_another_thread_wakes_the_loop() -> None:
    """An event source on another thread (e.g. a watch thread) may call mark_dirty; the loop syncs once."""
    driver = fresh_driver()
    h = Harness(driver)

    await h.start()
    await h.idle()
    h.desired = attrs.evolve(BASE, routes=[R1])
    marker = threading.Thread(target=h.rec.mark_dirty, args=("from-thread",))
    marker.start()
    marker.join(10)
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert h.results[1].reasons == ("from-thread",)
    assert [op.describe() for op in h.results[1].applied if isinstance(op, Op)] == [f"delete route {key_text(R2.key)}"]


class LoopTicker:
    """A task on the loop that ticks every millisecond and opens ``gate`` at its ``at``-th tick.

    Work that waits for the gate can only see it open if the loop keeps running while it waits: on the
    loop's own thread it would wait in vain (``gate.wait`` gives up after its safety limit).
    """

    def __init__(self, at: int) -> None:
        self.gate = threading.Event()
        self.ticks = 0
        self._at = at
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.001)
            self.ticks += 1
            if self.ticks >= self._at:
                self.gate.set()

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def test_planner_and_diff_run_in_the_worker_thread_while_the_loop_keeps_ticking() -> None:
    """A slow planner and a slow diff wait for ticks of the loop; both see them, in a thread of their own."""
    loop_thread = threading.current_thread()
    seen: list[tuple[str, bool, bool]] = []
    plan_ticker = LoopTicker(5)
    diff_ticker = LoopTicker(10)

    def planner() -> DesiredState:
        seen.append(("plan", threading.current_thread() is not loop_thread, plan_ticker.gate.wait(10)))
        return BASE

    def differ(desired: DesiredState, observed: DesiredState) -> ChangeSet:
        seen.append(("diff", threading.current_thread() is not loop_thread, diff_ticker.gate.wait(10)))
        return diff(desired, observed)

    driver = fresh_driver()
    rec = Reconciler(driver, planner, resync_period=RESYNC, name="slow", differ=differ)
    try:
        result = await rec.sync_once()
    finally:
        await rec.aclose()
        await plan_ticker.stop()
        await diff_ticker.stop()
    assert seen == [("plan", True, True), ("diff", True, True)]
    assert result.ok is True
    assert driver.inner.observe() == BASE


async def test_stopping_waits_for_the_driver_call_without_blocking_the_loop() -> None:
    """Cancelled during an apply, run() waits for that apply to end, and the loop keeps running meanwhile:
    the apply waits for ticks of the loop that happen only after the cancel."""
    entered = threading.Event()
    opened: list[bool] = []
    inner = fresh_driver()
    ticker: list[LoopTicker] = []

    class SlowDriver:
        def observe(self) -> DesiredState:
            return inner.observe()

        def apply(self, changes: ChangeSet) -> ApplyResult:
            entered.set()
            for _ in range(10_000):  # bounded: the test starts the ticker only after the cancel
                if ticker:
                    break
                time.sleep(0.001)
            opened.append(bool(ticker) and ticker[0].gate.wait(10))
            return inner.apply(changes)

    rec = Reconciler(SlowDriver(), lambda: BASE, resync_period=RESYNC, name="slow", settle=0.0)
    task = asyncio.create_task(rec.run())
    for _ in range(10_000):  # bounded: the apply starts in the worker thread
        if entered.is_set():
            break
        await asyncio.sleep(0.001)
    task.cancel()
    await asyncio.sleep(0)
    ticker.append(LoopTicker(5))
    with pytest.raises(asyncio.CancelledError):
        await task
    await ticker[0].stop()
    assert opened == [True]
    assert rec.phase == "stopped"
    assert inner.inner.observe() == BASE


async def test_status_json_lists_what_is_not_done_and_counts_the_rest() -> None:
    """status_json() (the route agent's status file) equals status().to_json() with the done objects left
    out and the same counts: an error (R2 fails), a pending delete (STALE, inputs not synced), 4 done."""
    seed = fake_node_driver(netlink=FakeNetlink(check_prefsrc=False))
    seed.apply(ChangeSet(ops=tuple(Op(verb="create", kind=k, obj=o) for k, o in _base_ops(STALE))))
    driver = FlakyDriver(inner=seed, fails=lambda op: op.obj == R2)
    h = Harness(driver, synced=False)
    await h.start()
    await h.stop()
    full = h.rec.status().to_json()
    assert full["counts"] == {"pending": 1, "done": 4, "error": 1}
    assert h.rec.status_json() == {**full, "objects": [o for o in full["objects"] if o["state"] != "done"]}
    assert [(o["kind"], o["state"]) for o in h.rec.status_json()["objects"]] == [
        ("routes", "error"),
        ("routes", "pending"),
    ]
