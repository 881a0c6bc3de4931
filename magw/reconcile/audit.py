"""The periodic resync's observe, off the sync path: an audit.

A full sync observes the driver, and at 100k routes that is seconds (the nft listing of the 100k-element set
alone takes libnftables about 3 s, the route dump 1-2 s): an Endpoint or health change arriving meanwhile
waited for all of it (docs/performance.md, ``benchmarks/event_latency.py``). With an audit the reconciler observes
for the periodic resync in a thread of its own, on a second driver (its own sockets: a netlink socket and a
libnftables context are not shared between threads), while event syncs go on against the known state.

The observation is used only if the reconciler did not change the kernel while it was taken: every sync that
applied something (or failed, or raised) moves the reconciler's *generation*, and an observation that started
at another generation may hold half of that change. Such an audit is discarded and started again; after
``max_discards`` in a row (events never leave it a quiet moment) the reconciler falls back to a blocking full
sync, so a resync is late at most by that much and never skipped. An audit that raised is discarded the same
way. Only the periodic resync is audited: the full syncs after a failure or a re-created link still observe
on the sync path, first.

The audit thread also compares its observation with the state the reconciler knew when the audit started. When
they are equal (no drift, the usual case) the audit is *clean*: the full sync then diffs against the known state,
whose objects are the planner's own, so the diff takes the identity shortcuts of an event's sync. A diff against
the fresh observation compares every object: 0.85 s at 100k routes, which an event arriving meanwhile waited
for (docs/performance.md, row 18c).

The audit's reads step aside while the sync path works (``magw.util.courtesy``): the reconciler holds its
``Gate`` busy for every sync, and the audit's thread is the gate's reader, so the driver's read loops wait while an
event is synced instead of sharing the GIL with it (docs/performance.md, row 22h). Each audit logs what its read
took and how long of it was spent stepping aside (``reconciler.audit_read``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import attrs
import structlog

from magw.desired.state import DesiredState
from magw.reconcile.worker import close_worker
from magw.util.courtesy import Gate

log = structlog.get_logger(__name__)

Observe = Callable[[], DesiredState]


def _lowest_priority() -> None:
    """Run the audit thread at nice 19: where it competes with a sync for a CPU, the sync goes first.

    Linux keeps a nice value per thread (``setpriority`` on the thread id); raising it needs no privilege. Where
    that is refused (another OS, a seccomp profile), the audit runs at the process's priority.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError) as exc:
        log.info("reconciler.audit_priority_unchanged", error=repr(exc))


@attrs.define
class _Taken:
    """One audit's outcome: the observation (None when it raised) and the generation it started at."""

    observed: DesiredState | None
    generation: int
    clean: bool = False  # ``observed`` equals the known state given to ``start``


class Audit:
    """Runs ``observe`` in its own thread on request and hands the result to the loop (``docs/reconciler.md``)."""

    def __init__(self, observe: Observe, *, name: str, max_discards: int = 3, gate: Gate | None = None) -> None:
        if max_discards < 1:
            raise ValueError(f"max_discards: must be at least 1, got {max_discards}")
        self._observe = observe
        self._name = name
        self._gate = gate  # the reconciler's: busy while it syncs, and the audit's reads wait meanwhile
        self.max_discards = max_discards
        self.discards = 0  # in a row; reset by an audit that was used and by a blocking full sync
        self._executor: ThreadPoolExecutor | None = None
        self._running: Future[tuple[DesiredState, bool]] | None = None
        self._done: _Taken | None = None
        self.clean = False  # the last observation ``take`` handed out equals the known state its audit was given

    @property
    def busy(self) -> bool:
        """An audit is under way or its result waits to be taken."""
        return self._running is not None or self._done is not None

    def start(self, generation: int, on_done: Callable[[], None], *, known: DesiredState | None = None) -> None:
        """Observe in the audit thread, and compare with ``known`` there; ``on_done()`` is called on the event loop
        when the result is ready. ``known`` is not changed in place by anyone (the reconciler replaces it)."""
        if self.busy:
            raise RuntimeError(f"reconciler {self._name}: an audit is already under way")
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"magw-{self._name}-audit", initializer=_lowest_priority
            )
        observe, gate, name = self._observe, self._gate, self._name

        def audit() -> tuple[DesiredState, bool]:
            start = time.monotonic()
            waited_before = gate.waited if gate is not None else 0.0
            with gate.reader() if gate is not None else contextlib.nullcontext():
                observed = observe()
            waited = (gate.waited - waited_before) if gate is not None else 0.0
            log.info("reconciler.audit_read", name=name, took_ms=round((time.monotonic() - start) * 1000, 1),
                     stepped_aside_ms=round(waited * 1000, 1))  # fmt: skip
            return observed, known is not None and observed == known  # O(objects), here rather than on the sync path

        running = self._executor.submit(audit)
        self._running = running
        log.info("reconciler.audit_started", name=self._name, generation=generation)

        def finished(future: Future[tuple[DesiredState, bool]]) -> None:
            error = future.exception()
            if error is not None:
                log.warning("reconciler.audit_failed", name=self._name, error=repr(error))
            observed, clean = (None, False) if error is not None else future.result()
            loop.call_soon_threadsafe(self._finish, running, _Taken(observed, generation, clean), on_done)

        running.add_done_callback(finished)

    def _finish(
        self, running: Future[tuple[DesiredState, bool]], taken: _Taken, on_done: Callable[[], None]
    ) -> None:
        if self._running is not running:
            return  # closed meanwhile
        self._running = None
        self._done = taken
        on_done()

    def take(self, generation: int) -> DesiredState | None:
        """The finished audit's observation if nothing was applied since it started, else None (a discard).

        Call only when ``ready``. Either way the audit is no longer busy afterwards.
        """
        taken, self._done = self._done, None
        self.clean = False
        if taken is None:
            raise RuntimeError(f"reconciler {self._name}: no audit result to take")
        if taken.observed is not None and taken.generation == generation:
            self.discards = 0
            self.clean = taken.clean
            return taken.observed
        self.discards += 1
        reason = "failed" if taken.observed is None else "kernel_changed"
        log.info("reconciler.audit_discarded", name=self._name, reason=reason, discards=self.discards)
        return None

    @property
    def ready(self) -> bool:
        return self._done is not None

    @property
    def exhausted(self) -> bool:
        """``max_discards`` audits in a row were discarded: the next resync observes on the sync path."""
        return self.discards >= self.max_discards

    async def aclose(self) -> None:
        """Wait (without blocking the loop) for an observe under way, then end the audit thread."""
        executor, self._executor = self._executor, None
        self._running = None
        self._done = None
        await close_worker(executor)
