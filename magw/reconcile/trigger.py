"""One trigger loop for the controllers and syncers: when to run a pass, one pass at a time.

The Globalnet daemon, the egress controller, the OVN syncer and the broker sync each run passes (read, plan,
write what differs) on this loop; the node reconciler has its own (``magw.reconcile.loop``: full and partial
syncs, audits, per-object retries). Rules:

- ``mark_dirty(reason)`` asks for a pass. Safe from any thread. Marks coalesce: however many arrive while a
  pass runs (or while the loop waits ``settle`` seconds after the first one), they give ONE more pass, which
  gets every distinct reason (``Wake.reasons``).
- A pass runs at start (reason ``start``), and ``resync`` seconds after the last pass ended when nothing asked
  earlier (reason ``resync``): a mark restarts that period.
- A pass that fails (it raised one of ``retry_on``, or returned ``FAILED``) is run again after
  ``backoff.delay(n)`` seconds for its n-th failure in a row (``magw.reconcile.retry.Backoff``: capped
  exponential; reason ``retry``) instead of after the period; a mark still runs a pass as usual. A pass that
  succeeds starts the count again. A raised failure is logged as ``failed_event`` (``trigger.pass_failed``
  unless the user keeps its own name); a returned ``FAILED`` is logged by the pass itself. Any other
  exception ends ``run()``: it is a bug, not a failure to retry.
- A pass may return ``Outcome(pause=seconds)``: the next pass comes after that many seconds, and marks
  meanwhile wait for it (reason ``resume``; 0: at once). A controller waiting for its lease has nothing to do before.
- Passes run one at a time, as coroutines on the event loop; ``offload(fn)`` runs blocking work in the
  trigger's one worker thread (``magw-<name>``, made on first use, ended when ``run()`` ends).
- ``run(stop)`` returns when ``stop`` is set, after the pass in progress. Time comes from a ``Clock``
  (``magw.reconcile.clock``): tests use ``FakeClock`` and never sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, TypeVar

import attrs
import structlog

from magw.reconcile.clock import Clock, MonotonicClock
from magw.reconcile.retry import Backoff
from magw.reconcile.worker import close_worker

log = structlog.get_logger(__name__)

T = TypeVar("T")

START = "start"
RESYNC = "resync"
RETRY = "retry"
RESUME = "resume"


@attrs.frozen(kw_only=True)
class Wake:
    """Why a pass runs: the distinct reasons since the last pass, in order; ``marked`` when ``mark_dirty``
    gave at least one of them (not only the loop's own ``start``, ``resync``, ``retry`` or ``resume``)."""

    reasons: tuple[str, ...]
    marked: bool


@attrs.frozen(kw_only=True)
class Outcome:
    """What a pass tells the loop: it failed (retry with backoff), or when to run the next one."""

    ok: bool = True
    pause: float | None = None  # the next pass in this many seconds, marks or not; None: the usual schedule

    def __attrs_post_init__(self) -> None:
        if self.pause is not None and (self.pause < 0 or not self.ok):
            raise ValueError(f"pause: must be >= 0 seconds after a pass that succeeded, got {self.pause}")


DONE = Outcome()
FAILED = Outcome(ok=False)

Pass = Callable[[Wake], Awaitable[Outcome]]
Phase = Literal["new", "idle", "settling", "running", "stopped"]


class Trigger:
    """Runs ``pass_`` when marked dirty, every ``resync`` seconds, and again after a failure with backoff."""

    def __init__(
        self,
        name: str,
        pass_: Pass,
        *,
        resync: float,
        backoff: Backoff | None = None,
        settle: float = 0.0,
        retry_on: tuple[type[Exception], ...] = (),
        failed_event: str = "trigger.pass_failed",
        clock: Clock | None = None,
    ) -> None:
        if resync <= 0:
            raise ValueError(f"resync: must be > 0 seconds, got {resync}")
        if settle < 0:
            raise ValueError(f"settle: must be >= 0 seconds, got {settle}")
        self.name = name
        self._pass = pass_
        self._resync = resync
        self._backoff = backoff if backoff is not None else Backoff()
        self._settle = settle
        self._retry_on = retry_on
        self._failed_event = failed_event
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._reasons: list[str] = []
        self._dirty = False
        self._marked = False
        self._due: float | None = None  # when the next pass runs without a mark
        self._due_reason = START
        self._hold = False  # a pause: marks wait for ``_due``
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()  # run()'s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.phase: Phase = "new"  # idle: waiting for a mark or the timer; settling: coalescing marks
        self.passes = 0
        self.failing = 0  # failed passes in a row

    # ----- asking for a pass ---------------------------------------------------------------------

    def mark_dirty(self, reason: str) -> None:
        """Ask for a pass soon; ``reason`` says why. Safe from any thread; bursts coalesce into one pass."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                loop.call_soon_threadsafe(self._mark, reason)
                return
        self._mark(reason)

    def _mark(self, reason: str) -> None:
        if reason not in self._reasons:
            self._reasons.append(reason)
        self._dirty = self._marked = True
        self._wake.set()

    # ----- the loop ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Passes until ``stop`` is set (the pass in progress ends first); the first one at once."""
        if self._loop is not None:
            raise RuntimeError(f"trigger {self.name}: already running")
        self._loop = asyncio.get_running_loop()
        self._stop = stop
        self._schedule(self._clock.now(), START, hold=False)
        relay = asyncio.create_task(self._relay(stop), name=f"{self.name}-stop")
        log.debug("trigger.started", name=self.name, resync=self._resync)
        try:
            while (wake := await self._next()) is not None:
                await self._run_pass(wake)
        finally:
            relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay
            executor, self._executor = self._executor, None
            await close_worker(executor)
            self._loop = None
            self.phase = "stopped"
            log.debug("trigger.stopped", name=self.name, passes=self.passes)

    async def _relay(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wake.set()

    def _schedule(self, at: float, reason: str, *, hold: bool) -> None:
        self._due, self._due_reason, self._hold = at, reason, hold

    async def _next(self) -> Wake | None:
        """Wait for the next pass (a mark, then ``settle``; or the timer); None once stopped."""
        while True:
            if self._stop.is_set():
                return None
            now = self._clock.now()
            timed = self._due is not None and now >= self._due
            if timed or (self._dirty and not self._hold):
                break
            self._wake.clear()
            self.phase = "idle"
            await self._clock.wait(self._wake, None if self._due is None else self._due - now)
        if not timed and self._settle > 0:
            self.phase = "settling"
            await self._clock.wait(self._stop, self._settle)  # marks meanwhile join this pass
            if self._stop.is_set():
                return None
        reasons = list(self._reasons)
        if timed and self._due_reason not in reasons:
            reasons.append(self._due_reason)
        wake = Wake(reasons=tuple(reasons), marked=self._marked)
        self._reasons.clear()
        self._dirty = self._marked = False
        self._due = None
        self.phase = "running"
        return wake

    async def _run_pass(self, wake: Wake) -> None:
        try:
            outcome = await self._pass(wake)
        except self._retry_on as exc:
            self._failed(exc)
            return
        finally:
            self.passes += 1
        if not outcome.ok:
            self._failed(None)
            return
        self.failing = 0
        now = self._clock.now()
        if outcome.pause is not None:
            self._schedule(now + outcome.pause, RESUME, hold=True)
        else:
            self._schedule(now + self._resync, RESYNC, hold=False)

    def _failed(self, exc: Exception | None) -> None:
        self.failing += 1
        delay = self._backoff.delay(self.failing)
        if exc is not None:
            log.warning(self._failed_event, name=self.name, error=str(exc), attempt=self.failing, retry_in=delay)
        self._schedule(self._clock.now() + delay, RETRY, hold=False)

    async def offload(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in the trigger's worker thread (one, made on first use), awaited without blocking."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"magw-{self.name}")
        call = functools.partial(fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)
