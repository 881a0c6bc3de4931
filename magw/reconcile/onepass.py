"""One sync's work, in ONE call in the reconciler's worker thread: plan, observe (when due), diff, apply, record.

Shaped for latency (docs/performance.md, row 38a): the loop used to hand each step to the worker thread and take
it back, four round trips per sync. Each hand-off waits for the GIL (up to the switch interval while the loop
runs Python: 1 ms in the route agent, 5 ms by default) and for a CPU on a busy machine: in a failover's sync
of a small lab the planner's 0.75 ms of work took 3-19 ms from the loop's side. One call makes one round
trip. The loop keeps the bookkeeping that must happen in its own thread (``magw.reconcile.loop``).

Nothing here raises: a planner's exception and a driver's are returned, apart, for the loop to log and count.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import attrs

from magw.desired.state import DesiredState
from magw.reconcile.changeset import NftChange, Op
from magw.reconcile.driver import ApplyResult, Driver
from magw.reconcile.retry import Filtered
from magw.reconcile.steps import SyncSteps


@attrs.define
class SyncWork:
    """What the worker thread did. ``plan_error``: the planner raised; ``desired`` None: it had no plan yet;
    ``driver_error``: observe, diff, apply or record raised (``result`` is then what is known of the apply)."""

    phases_ms: list[tuple[str, float]] = attrs.field(factory=list)
    plan_error: Exception | None = None
    desired: DesiredState | None = None
    filtered: Filtered | None = None
    deferred: tuple[Op | NftChange, ...] = ()
    result: ApplyResult = attrs.field(factory=ApplyResult)
    known: DesiredState | None = None
    relinked: bool = False
    took: float = 0.0
    driver_error: Exception | None = None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as ``name`` in ``phases_ms`` (also when it raises)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.phases_ms.append((name, round((time.perf_counter() - started) * 1000, 3)))


def run_sync(
    planner: Callable[[], DesiredState | None],
    driver: Driver,
    steps: SyncSteps,
    *,
    observe: bool,
    observed: DesiredState | None,
    prune: Callable[[], bool],
    now: float,
    full: bool,
    started: float,
) -> SyncWork:
    """Plan; then, with a plan, diff against ``observed`` (observing first when ``observe``), apply what differs,
    and record it. ``phases_ms``: each step's wall time, in the order they ran."""
    work = SyncWork()
    try:
        with work.phase("plan"):
            work.desired = planner()
    except Exception as exc:  # a planner bug must not kill the loop: the loop logs it
        work.plan_error = exc
        return work
    if work.desired is None:
        return work
    try:
        if observe:
            with work.phase("observe"):
                observed = driver.observe()
        assert observed is not None, "a partial sync diffs against the known state"
        with work.phase("diff"):
            work.filtered, work.deferred = steps.prepare(work.desired, observed, prune=prune(), now=now)
        if work.filtered.changes:
            with work.phase("apply"):
                work.result = driver.apply(work.filtered.changes)
        with work.phase("record"):
            work.known, work.relinked, work.took = steps.record(
                work.desired,
                observed,
                work.result,
                now=now,
                full=full,
                started=started,
                skipped=work.filtered.skipped,
                deferred=work.deferred,
            )
    except Exception as exc:  # a driver that raises (socket closed, namespace gone) is retried with backoff
        work.driver_error = exc
    return work
