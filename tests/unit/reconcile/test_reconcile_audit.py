"""The periodic resync observed off the sync path (magw.reconcile.audit), on the fake node driver with a fake clock.

The audit's observe is gated by the test: while it is held, events must still be synced; its observation is used
only when nothing was applied meanwhile; a stale or failed one is discarded and the audit started again, and after
``max_discards`` in a row the resync observes on the sync path. No timed assertions.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from structlog.testing import capture_logs

from magw.desired.state import DesiredState
from magw.reconcile.audit import Audit
from magw.reconcile.changeset import ChangeSet, Op, key_text
from magw.util.courtesy import step_aside
from tests.support.reconcile_harness import (
    BASE,
    R1,
    RESYNC,
    SETTLE,
    FlakyDriver,
    Harness,
    fresh_driver,
    netlink_of,
    route,
)

R3 = route("10.3.0.0/16")


class GatedObserve:
    """The audit's observe: the same fake node, read when the test opens the gate (bounded wait)."""

    def __init__(self, driver: FlakyDriver, *, fails: bool = False) -> None:
        self.driver = driver
        self.fails = fails
        self.gate = threading.Event()
        self.started = threading.Event()
        self.calls = 0
        self.nice: int | None = None  # of the thread the audit ran in

    def __call__(self) -> DesiredState:
        self.calls += 1
        self.nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        self.started.set()
        if not self.gate.wait(timeout=10):
            raise TimeoutError("the test never opened the gate")
        if self.fails:
            raise RuntimeError("dump interrupted")
        return self.driver.inner.observe()


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    with capture_logs() as captured:
        yield captured


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


def spy_on_serve(h: Harness) -> list[tuple[str, ...]]:
    """Record each turn of the loop (``Reconciler._serve``): a loop that spins would show here."""
    served: list[tuple[str, ...]] = []
    real = h.rec._serve

    async def counting(reasons: tuple[str, ...]) -> None:
        served.append(reasons)
        await real(reasons)

    h.rec._serve = counting  # type: ignore[method-assign]
    return served


async def turns(h: Harness, count: int) -> None:
    """Let the loop run ``count`` event-loop turns, ending any settle delay on the fake clock."""
    for _ in range(count):
        if h.rec.phase == "settling":
            h.clock.advance(SETTLE)
        await asyncio.sleep(0)


async def resync_after_drift(*, fails: bool) -> tuple[FlakyDriver, GatedObserve, Harness]:
    """Start, delete R1 behind the reconciler's back, let the periodic resync (its audit open) run, stop."""
    driver = fresh_driver()
    gated = GatedObserve(driver, fails=fails)
    gated.gate.set()
    h = Harness(driver, audit=gated)
    await h.start()
    await h.idle()
    assert netlink_of(driver).remove("routes", R1.key) is True
    h.clock.advance(RESYNC)
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    return driver, gated, h


async def test_the_periodic_resync_uses_the_audits_observation_and_repairs_drift(logs: list[dict[str, Any]]) -> None:
    """A route deleted behind our back comes back at the resync; the sync path did not observe again."""
    driver, gated, h = await resync_after_drift(fails=False)
    assert [(r.full, r.reasons) for r in h.results] == [(True, ("start",)), (True, ("audit",))]
    assert [op.describe() for op in h.results[1].applied if isinstance(op, Op)] == [f"create route {key_text(R1.key)}"]
    assert (driver.observes, gated.calls) == (1, 1)  # the start's observe; the resync's was the audit's
    assert gated.nice == 19  # the audit thread yields the CPU to the syncs
    assert driver.inner.observe() == BASE
    assert len(events(logs, "reconciler.audit_started")) == 1
    assert events(logs, "reconciler.audit_discarded") == []
    assert events(logs, "reconciler.audit_clean") == []  # the kernel was not what the reconciler knew


async def test_a_resync_that_finds_no_drift_diffs_against_the_known_state(logs: list[dict[str, Any]]) -> None:
    """The audit thread finds the kernel equal to the known state: the resync's diff is against the known state
    (the planner's objects, an event's shortcuts), not against the fresh observation, and changes nothing."""
    driver = fresh_driver()
    gated = GatedObserve(driver)
    gated.gate.set()
    h = Harness(driver, audit=gated)
    await h.start()
    await h.idle()
    known = h.rec._known
    diffed: list[DesiredState] = []
    differ = h.rec._steps.differ

    def spy(desired: DesiredState, observed: DesiredState) -> ChangeSet:
        diffed.append(observed)
        return differ(desired, observed)

    h.rec._steps.differ = spy
    h.clock.advance(RESYNC)
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert [(r.full, r.reasons, r.applied) for r in h.results[1:]] == [(True, ("audit",), ())]
    assert known is not None and len(diffed) == 1 and diffed[0] is known
    assert (driver.observes, gated.calls) == (1, 1)
    assert len(events(logs, "reconciler.audit_clean")) == 1


async def test_an_event_is_synced_while_the_audit_observes_and_the_stale_audit_is_discarded(
    logs: list[dict[str, Any]],
) -> None:
    """While the audit is held, an event's partial sync runs and applies; the audit then holds a kernel from before
    that change, so it is discarded, started again, and the second one is used."""
    driver = fresh_driver()
    gated = GatedObserve(driver)
    h = Harness(driver, audit=gated)
    await h.start()
    await h.idle()
    h.clock.advance(RESYNC)
    await h.until(gated.started.is_set)
    await h.until(lambda: h.rec.phase == "idle")  # the loop waits for work, no sync, while the audit is under way
    assert len(h.results) == 1
    serves = spy_on_serve(h)
    h.clock.advance(RESYNC)  # an audit longer than the period: no second resync, and no turn of the loop at all
    await turns(h, 200)
    assert serves == []
    h.desired = attrs.evolve(BASE, routes=[*BASE.routes, R3])
    h.rec.mark_dirty("endpoint")
    await h.until(lambda: len(h.results) == 2)
    assert (h.results[1].full, h.results[1].reasons) == (False, ("endpoint",))
    assert netlink_of(driver).get("routes", R3.key) is not None  # applied before the audit ended
    gated.gate.set()
    await h.until(lambda: len(h.results) == 3)
    await h.stop()
    assert (h.results[2].full, h.results[2].reasons, h.results[2].applied) == (True, ("audit",), ())
    assert [e["reason"] for e in events(logs, "reconciler.audit_discarded")] == ["kernel_changed"]
    assert (driver.observes, gated.calls) == (1, 2)


async def test_the_audits_reads_step_aside_while_a_sync_runs(logs: list[dict[str, Any]]) -> None:
    """Every sync holds the reconciler's gate busy (the planner runs inside it), and the audit's observe runs as the
    gate's reader: a read loop's step_aside waits while an event is synced and goes on once it is done. The audit
    logs its read's time and how much of it was spent stepping aside (magw.util.courtesy)."""
    driver = fresh_driver()
    go, stepping, stepped = threading.Event(), threading.Event(), threading.Event()

    def observe() -> DesiredState:
        if not go.wait(timeout=10):
            raise TimeoutError("the test never let the audit read")
        stepping.set()
        step_aside()  # what the driver's read loops do
        stepped.set()
        return driver.inner.observe()

    h = Harness(driver, audit=observe)
    h.rec.gate.max_wait = 30.0  # the wait below must end by the sync, not by the reader's bound
    planned_busy: list[bool] = []
    planner = h.rec._planner

    def planning() -> DesiredState | None:
        planned_busy.append(h.rec.gate.is_busy)
        return planner()

    h.rec._planner = planning
    await h.start()
    await h.idle()
    assert planned_busy == [True] and not h.rec.gate.is_busy
    h.clock.advance(RESYNC)
    await h.until(lambda: h.rec._audit is not None and h.rec._audit.busy)
    with h.rec.gate.busy():  # a sync under way
        go.set()
        await h.until(stepping.is_set)
        await asyncio.sleep(0.05)
        assert not stepped.is_set()  # the audit waits while the sync works
    await h.until(stepped.is_set)
    await h.until(lambda: len(h.results) == 2)
    await h.stop()
    assert h.rec.gate.waits == 1 and h.rec.gate.waited >= 0.04
    (read,) = events(logs, "reconciler.audit_read")
    assert read["name"] == "t" and read["stepped_aside_ms"] >= 40 and read["took_ms"] >= read["stepped_aside_ms"]
    assert planned_busy == [True, True]


async def test_audits_that_keep_failing_end_in_a_full_sync_on_the_sync_path(logs: list[dict[str, Any]]) -> None:
    """An audit that raises is discarded like a stale one; after three in a row the resync observes itself."""
    driver, gated, h = await resync_after_drift(fails=True)
    assert [e["reason"] for e in events(logs, "reconciler.audit_discarded")] == ["failed"] * 3
    assert len(events(logs, "reconciler.audit_gave_up")) == 1
    assert (h.results[1].full, driver.observes, gated.calls) == (True, 2, 3)
    assert driver.inner.observe() == BASE


def test_max_discards_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_discards: must be at least 1, got 0"):
        Audit(lambda: DesiredState(), name="t", max_discards=0)
