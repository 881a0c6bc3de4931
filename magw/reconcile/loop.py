"""The reconciler loop: plan, diff against the kernel, apply; coalesced, retried, resynced.

Rules (see docs/reconciler.md):

- ``mark_dirty(reason)`` asks for a sync. Marks that arrive within the settle delay
  (default 10 ms) of each other are served by one sync; an ``urgent`` mark (a health
  change) starts its sync without that delay.
- A FULL sync observes the driver, diffs and applies. It runs at start, every
  ``resync_period`` seconds, after any failure and after a link was replaced or
  deleted. Other syncs are PARTIAL: they diff against the known state (the last
  observed state with every applied operation carried out on it). With ``audit``
  (an observe on a second driver) the periodic resync observes in a thread of its
  own while partial syncs go on, and its sync uses that observation unless the
  kernel was changed meanwhile (``magw.reconcile.audit``).
- An operation that failed is left out of later syncs until its retry time
  (capped exponential backoff per object); a change of that desired object clears
  its backoff. Each object's status (pending, done, error text) is in ``status()``.
- Pruning waits for the inputs: a planner returns None while its inputs have not
  delivered their first full state, and then no sync runs at all. A reconciler
  may also get ``inputs_synced``: while it returns False, syncs create and
  replace but every delete (and nft table delete) is deferred.
- Everything that takes time runs in ONE dedicated worker thread, always the
  same one: the planner, the driver's observe and apply, the diff and carrying
  the applied operations out on the known state. The loop keeps only the
  bookkeeping (retries, status, metrics), so health probes with 20 ms deadlines
  on the same loop are not held up by a 10k-route sync
  (``benchmarks/loop_lag.py``). Drivers whose sockets are bound to the thread
  that made them (pyroute2 0.9's sync IPRoute runs its own event loop and fails
  inside a running one) work when they are created in that thread on first use.
  The planner therefore must only read its inputs (values the loop replaces
  whole, never mutates in place).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import structlog
from prometheus_client import CollectorRegistry

from magw.desired.state import DesiredState
from magw.reconcile.audit import Audit, Observe
from magw.reconcile.changeset import ChangeSet, Op
from magw.reconcile.clock import Clock, MonotonicClock
from magw.reconcile.diff import diff
from magw.reconcile.driver import ApplyResult, Driver
from magw.reconcile.known import carry_out
from magw.reconcile.metrics import ReconcilerMetrics
from magw.reconcile.onepass import SyncWork, run_sync
from magw.reconcile.prunes import Differ
from magw.reconcile.result import SyncResult, log_sync
from magw.reconcile.retry import Backoff, RetryBook
from magw.reconcile.status import ObjectStatus, ReconcilerStatus, StatusBook
from magw.reconcile.steps import SyncSteps
from magw.reconcile.worker import close_worker
from magw.util.courtesy import Gate

log = structlog.get_logger(__name__)

T = TypeVar("T")
Planner = Callable[[], DesiredState | None]
Phase = Literal["new", "idle", "settling", "syncing", "stopped"]

_FOLLOW_UP = "link_changed"
_RESYNC = "resync"
_AUDIT = "audit"

__all__ = ["Differ", "Phase", "Planner", "Reconciler", "SyncResult"]


class Reconciler:
    """Keeps one driver's objects equal to what ``planner()`` wants."""

    def __init__(
        self,
        driver: Driver,
        planner: Planner,
        *,
        resync_period: float,
        name: str = "node",
        registry: CollectorRegistry | None = None,
        backoff_base: float = 0.5,
        backoff_cap: float = 60.0,
        settle: float = 0.01,
        clock: Clock | None = None,
        inputs_synced: Callable[[], bool] | None = None,
        on_sync: Callable[[SyncResult], None] | None = None,
        differ: Differ = diff,
        audit: Observe | None = None,
    ) -> None:
        if resync_period <= 0:
            raise ValueError(f"resync_period: must be > 0 seconds, got {resync_period}")
        if settle < 0:
            raise ValueError(f"settle: must be >= 0 seconds, got {settle}")
        self.name = name
        self._driver = driver
        self._planner = planner
        self._resync_period = resync_period
        self._settle = settle
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._inputs_synced = inputs_synced
        self._on_sync = on_sync
        self._retry = RetryBook(backoff=Backoff(base=backoff_base, cap=backoff_cap))
        self._sync_backoff = Backoff(base=backoff_base, cap=backoff_cap)
        self._status = StatusBook()
        self._metrics = ReconcilerMetrics(name, registry)
        self._steps = SyncSteps(differ=differ, retry=self._retry, metrics=self._metrics)  # in the worker thread
        self._known: DesiredState | None = None
        self.gate = Gate()  # busy while a sync runs: the audit's reads step aside meanwhile (magw.util.courtesy)
        self._audit = Audit(audit, name=name, gate=self.gate) if audit is not None else None
        self._generation = 0  # moves whenever a sync may have changed the kernel: an audit from before is stale
        self._need_full = True
        self._reasons: list[str] = []
        self._dirty = False
        self._urgent = False  # a mark asked to skip the settle delay (mark_dirty)
        self._stopping = False
        self._wake = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._phase: Phase = "new"
        self._syncs = 0
        self._full_syncs = 0
        self._sync_errors = 0
        self._sync_retry_at: float | None = None
        self._last_attempt_at: float | None = None
        self._last_full_attempt_at: float | None = None
        self._last_sync_at: float | None = None
        self._last_full_sync_at: float | None = None

    # ----- event sources -------------------------------------------------------------------------

    def mark_dirty(self, reason: str, *, urgent: bool = False) -> None:
        """Ask for a sync. Safe from any thread; bursts coalesce into one sync. ``urgent`` (a gateway's health
        changed: traffic is being lost until the kernel follows) skips the settle delay of a sync that starts
        from idle; what arrives while it runs is coalesced into the next one as usual."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                loop.call_soon_threadsafe(functools.partial(self._mark, reason, urgent=urgent))
                return
        self._mark(reason, urgent=urgent)

    def apply_now(
        self, make: Callable[[DesiredState], tuple[Op, ...]], *, driver: Driver | None = None
    ) -> ApplyResult | None:
        """Apply ``make(known)`` through the driver at once, on the loop's thread, ahead of the sync an event
        asked for (a dead gateway's group replaces: magw.reconcile.shortcut). None, with nothing done, while a
        sync runs in the worker thread (it owns the driver then) or while the known state is in doubt: the sync
        does it all. What is applied becomes known, so the sync's diff starts from it; a failure throws the
        known state away (the next sync observes). ``driver``: one that applies to what the reconciler's driver
        wraps, without the wrapper's own work (the route agent's WireGuard cable check)."""
        known = self._known
        if self._phase == "syncing" or known is None or not self._partial_possible():
            return None
        ops = make(known)
        if not ops:
            return None
        self._generation += 1  # an audit that observed before this is stale
        started = time.perf_counter()
        try:
            with self.gate.busy():
                result = (driver or self._driver).apply(ChangeSet(ops=ops))
        except Exception as exc:  # the driver raised: what it did is unknown; the sync observes and does it all
            self._known, self._need_full = None, True
            log.error("reconciler.apply_now_failed", name=self.name, error=repr(exc))
            return None
        if result.failed:
            self._known, self._need_full = None, True
        else:
            self._known = carry_out(known, result.applied)
        self._metrics.record_apply_now(result, seconds=time.perf_counter() - started)
        return result

    def _mark(self, reason: str, *, urgent: bool = False) -> None:
        if reason not in self._reasons:
            self._reasons.append(reason)
        self._dirty = True
        self._urgent = self._urgent or urgent
        self._wake.set()

    # ----- introspection -------------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        """What the loop is doing: idle (waiting for work), settling (coalescing marks), syncing."""
        return self._phase

    @property
    def syncs(self) -> int:
        """Syncs that ran (the planner returned a state), full or partial."""
        return self._syncs

    @property
    def full_syncs(self) -> int:
        return self._full_syncs

    def status(self) -> ReconcilerStatus:
        return self._status_with(self._status.snapshot())

    def status_json(self) -> dict[str, Any]:
        """``status().to_json()`` without the objects that are done (``counts`` still counts them).

        Cheap with thousands of objects (``StatusBook.noted``): the route agent writes it to its status
        file on the event loop after every sync and every health transition.
        """
        done, noted = self._status.noted()
        doc = self._status_with(noted).to_json()
        doc["counts"]["done"] = done
        return doc

    def _status_with(self, objects: tuple[ObjectStatus, ...]) -> ReconcilerStatus:
        return ReconcilerStatus(
            name=self.name,
            synced=self._syncs > 0,
            syncs=self._syncs,
            full_syncs=self._full_syncs,
            last_sync_at=self._last_sync_at,
            last_full_sync_at=self._last_full_sync_at,
            objects=objects,
        )

    # ----- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Sync at start, then whenever marked dirty, due for resync or for a retry, until ``stop()``."""
        if self._loop is not None:
            raise RuntimeError(f"reconciler {self.name}: run() may only be called once")
        self._loop = asyncio.get_running_loop()
        log.info("reconciler.started", name=self.name, resync_period=self._resync_period)
        self._mark("start")
        try:
            while not self._stopping:
                await self._wait_for_work()
                if self._stopping:
                    break
                if not self._urgent:
                    self._phase = "settling"
                    await self._clock.wait(self._stop_event, self._settle)
                if self._stopping:
                    break
                reasons = tuple(self._reasons)
                self._reasons.clear()
                self._dirty = self._urgent = False
                await self._serve(reasons)
        finally:
            self._phase = "stopped"
            await self.aclose()
            log.info("reconciler.stopped", name=self.name, syncs=self._syncs)

    def stop(self) -> None:
        """Make ``run()`` return after the sync in progress (if any). Safe from any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stop_now)
        else:
            self._stop_now()

    def _stop_now(self) -> None:
        self._stopping = True
        self._stop_event.set()
        self._wake.set()

    async def aclose(self) -> None:
        """Wait (without blocking the loop) for a worker call in progress, then end the worker thread.

        ``run()`` does this when it ends, also when cancelled; after ``sync_once`` call it yourself.
        """
        if self._audit is not None:
            await self._audit.aclose()
        executor, self._executor = self._executor, None
        await close_worker(executor)

    async def _wait_for_work(self) -> None:
        while not (self._dirty or self._stopping):
            self._phase = "idle"
            deadline, reason = self._next_deadline()
            now = self._clock.now()
            if deadline is not None and deadline <= now:
                self._mark(reason)
                return
            self._wake.clear()
            await self._clock.wait(self._wake, None if deadline is None else deadline - now)

    def _next_deadline(self) -> tuple[float | None, str]:
        """The earliest of: periodic resync, a sync-level retry, an object's retry."""
        candidates: list[tuple[float, str]] = []
        if self._last_full_attempt_at is not None and not (self._audit is not None and self._audit.busy):
            candidates.append((self._last_full_attempt_at + self._resync_period, _RESYNC))
        # A retry time not after the last attempt was already served (also when the planner had no state).
        for retry_at in (self._sync_retry_at, self._retry.next_retry()):
            if retry_at is not None and (self._last_attempt_at is None or retry_at > self._last_attempt_at):
                candidates.append((retry_at, "retry"))
        if not candidates:
            return None, ""
        return min(candidates)

    def _full_due(self) -> bool:
        if not self._partial_possible() or self._last_full_attempt_at is None:
            return True
        return self._audit is None and self._resync_due()  # with an audit, the periodic resync is _audit_due's

    def _resync_due(self) -> bool:
        last = self._last_full_attempt_at
        return last is not None and self._clock.now() >= last + self._resync_period

    def _partial_possible(self) -> bool:
        """The known state can stand in for an observe: no full sync is owed (what an audit needs too)."""
        return not self._need_full and self._known is not None

    def _audit_due(self) -> bool:
        audit = self._audit
        return audit is not None and not audit.busy and self._partial_possible() and self._resync_due()

    async def _serve(self, reasons: tuple[str, ...]) -> None:
        """One turn of the loop: use a finished audit, start a due one, or sync (full when due)."""
        audit = self._audit
        if audit is not None and audit.ready:
            observed = audit.take(self._generation)
            if observed is not None and self._partial_possible():
                if audit.clean:
                    # The kernel holds what we know (nothing was applied since the audit started, so the known
                    # state is the one it was compared with, or one of equal content): diff against the known
                    # state, whose objects are the planner's, as an event's sync does, rather than object by
                    # object against the observation (magw.reconcile.audit).
                    log.info("reconciler.audit_clean", name=self.name)
                    observed = self._known
                await self.sync_once(full=True, reasons=reasons, observed=observed)
                return
            if audit.exhausted:  # events left no quiet moment: observe on the sync path this time
                log.info("reconciler.audit_gave_up", name=self.name, discards=audit.discards)
                audit.discards = 0
                self._need_full = True
            elif self._partial_possible():
                self._start_audit()
        elif self._audit_due():
            self._start_audit()
        if audit is not None and audit.busy:
            reasons = tuple(r for r in reasons if r not in (_RESYNC, _AUDIT))
            if not reasons and not self._full_due():
                return  # nothing but the audit asked for this turn
        await self.sync_once(full=self._full_due(), reasons=reasons or (_AUDIT,))

    def _start_audit(self) -> None:
        assert self._audit is not None
        self._last_full_attempt_at = self._clock.now()  # the resync is under way: the next one is a period away
        self._audit.start(self._generation, lambda: self._mark(_AUDIT), known=self._known)

    # ----- one sync ------------------------------------------------------------------------------

    async def sync_once(
        self, *, full: bool = True, reasons: tuple[str, ...] = ("manual",), observed: DesiredState | None = None
    ) -> SyncResult:
        """Run one sync now (full: observe first, or use ``observed``, an audit's). The loop uses this; so do
        ``--once`` and tests."""
        with self.gate.busy():
            return await self._sync_once(full=full, reasons=reasons, observed=observed)

    async def _sync_once(
        self, *, full: bool, reasons: tuple[str, ...], observed: DesiredState | None
    ) -> SyncResult:
        self._phase = "syncing"
        started = time.perf_counter()
        now = self._clock.now()
        self._last_attempt_at = now
        if full or self._known is None:
            full = True
            self._last_full_attempt_at = now
        work = await self._offload(
            run_sync,
            self._planner,
            self._driver,
            self._steps,
            observe=observed is None and full,  # full is True above whenever nothing is known
            observed=observed if observed is not None else self._known,
            prune=lambda: self._inputs_synced is None or self._inputs_synced(),
            now=now,
            full=full,
            started=started,
        )
        if work.plan_error is not None:  # a planner bug must not kill the loop; the next input change retries
            exc = work.plan_error
            log.error("reconciler.plan_failed", name=self.name, error=repr(exc), exc_info=exc)
            self._metrics.error("plan")
            return self._finish(SyncResult(full=full, planned=False, reasons=reasons, error=repr(exc)))
        if work.desired is None:
            log.info("reconciler.waiting_for_inputs", name=self.name, reasons=",".join(reasons))
            self._need_full = self._need_full or full
            return self._finish(SyncResult(full=full, planned=False, reasons=reasons))
        if work.driver_error is not None:  # a driver that raises (socket closed, namespace gone) is retried
            return self._finish(
                self._sync_failed(work.driver_error, full=full, reasons=reasons, now=now, started=started)
            )
        self._sync_errors = 0
        self._sync_retry_at = None
        return self._finish(self._synced(work, full=full, reasons=reasons, now=now))

    def _synced(self, work: SyncWork, *, full: bool, reasons: tuple[str, ...], now: float) -> SyncResult:
        """The loop's bookkeeping after a sync whose every step ran."""
        assert work.desired is not None and work.filtered is not None
        result, filtered, deferred = work.result, work.filtered, work.deferred
        if result.applied or result.failed:
            self._generation += 1
        follow_up = work.relinked and reasons != (_FOLLOW_UP,)
        self._known = None if result.failed or follow_up else work.known
        self._need_full = bool(result.failed) or follow_up
        if follow_up:
            self._mark(_FOLLOW_UP)
        failed = result.failed
        self._status.record(work.desired, self._retry, skipped=filtered.skipped, deferred=deferred, failed=failed)
        self._syncs += 1
        self._last_sync_at = now
        if full:
            self._full_syncs += 1
            self._last_full_sync_at = now
        sync = SyncResult(
            full=full,
            planned=True,
            reasons=reasons,
            applied=result.applied,
            failures=result.failed,
            skipped=len(filtered.skipped),
            deferred=len(deferred),
            took_ms=round(work.took * 1000, 3),
            phases_ms=tuple(work.phases_ms),
        )
        log_sync(self.name, sync, self._retry, self._clock.now())
        return sync

    def _sync_failed(
        self, exc: Exception, *, full: bool, reasons: tuple[str, ...], now: float, started: float
    ) -> SyncResult:
        self._sync_errors += 1
        self._generation += 1  # the driver raised: it may have changed part of what it was asked
        delay = self._sync_backoff.delay(self._sync_errors)
        self._sync_retry_at = now + delay
        self._known = None
        self._need_full = True
        self._metrics.error("sync")
        log.error("reconciler.sync_failed", name=self.name, error=repr(exc), attempt=self._sync_errors, retry_in=delay)
        took_ms = round((time.perf_counter() - started) * 1000, 3)
        return SyncResult(full=full, planned=True, reasons=reasons, took_ms=took_ms, error=repr(exc))

    def _finish(self, result: SyncResult) -> SyncResult:
        if self._phase == "syncing":
            self._phase = "idle"
        if self._on_sync is not None:
            try:
                self._on_sync(result)
            except Exception as exc:  # a listener's bug is logged, never stops the loop
                log.exception("reconciler.listener_failed", name=self.name, error=repr(exc))
        return result

    async def _offload(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """``fn(*args, **kwargs)`` in the worker thread (made on first use), awaited without blocking the loop."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"magw-{self.name}")
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)
