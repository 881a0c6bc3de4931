"""A background reader steps aside while the sync path works: ``Gate``, ``step_aside``, ``courteous``.

Python runs one thread at a time (the GIL) and hands it over every 5 ms (``sys.getswitchinterval()``), whatever
the threads' nice values. An audit that reads 100k set elements or routes in Python beside an event's sync
therefore about halves the sync's speed while both run, and an event that meets the audit waited up to 4-6x its
usual time (docs/performance.md, row 22g: event to kernel p99 173 ms, against 39 ms without the audit).

With a gate, the sync path says when it works (``with gate.busy():``), and the reader's loops call
``step_aside()`` every few hundred items (``courteous(items)`` does it for a loop over an iterable). While the
gate is busy, ``step_aside()`` waits (the GIL released) until it is idle again. A reader is a thread that entered
``with gate.reader():``; in any other thread ``step_aside()`` does nothing, so the driver code that calls it works
the same on the sync path, in the CLI and in tests.

The reader is never starved: a wait lasts at most ``max_wait`` (0.1 s); after one that ran out the reader goes on
for ``grant`` (10 ms) whatever the gate says. Under events back to back it still gets about a tenth of the time,
and an event loses at most about one ``grant`` to it. Shaped for the latency of the other threads: with the gate
idle a step costs an attribute read and a flag test; only a busy gate reads the clock. Pure: no I/O.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

EVERY = 256  # items between two steps aside in ``courteous``: well under a millisecond of parsing


class Gate:
    """The sync path's "working now" flag, which readers in other threads wait on (``step_aside``)."""

    def __init__(self, *, max_wait: float = 0.1, grant: float = 0.01) -> None:
        if not max_wait > 0 or grant < 0:
            raise ValueError(f"max_wait must be > 0 and grant >= 0 seconds, got {max_wait} and {grant}")
        self.max_wait = max_wait
        self.grant = grant
        self._idle = threading.Event()
        self._idle.set()
        self._busy = 0
        self._lock = threading.Lock()
        self.waits = 0  # steps aside that waited, over the gate's life
        self.waited = 0.0  # seconds they waited

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """The sync path works inside the block (it may nest, and may be entered from several threads)."""
        with self._lock:
            self._busy += 1
            self._idle.clear()
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                if self._busy == 0:
                    self._idle.set()

    @property
    def is_busy(self) -> bool:
        return not self._idle.is_set()

    @contextlib.contextmanager
    def reader(self) -> Iterator[None]:
        """The calling thread reads in the background inside the block: its ``step_aside()`` calls wait on this
        gate while it is busy."""
        previous = getattr(_local, "reader", None)
        _local.reader = _Reader(self)
        try:
            yield
        finally:
            _local.reader = previous

    def _wait(self, reader: _Reader) -> None:
        start = time.monotonic()
        if start < reader.granted_until:
            return
        if not self._idle.wait(self.max_wait):
            reader.granted_until = time.monotonic() + self.grant
        took = time.monotonic() - start
        with self._lock:
            self.waits += 1
            self.waited += took


class _Reader:
    __slots__ = ("gate", "granted_until")

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.granted_until = 0.0


_local = threading.local()


def step_aside() -> None:
    """In a reader's thread (``Gate.reader``): wait while the sync path is busy. Anywhere else: nothing."""
    reader: _Reader | None = getattr(_local, "reader", None)
    if reader is not None and not reader.gate._idle.is_set():
        reader.gate._wait(reader)


def courteous(items: Iterable[T], every: int = EVERY) -> Iterator[T]:
    """``items``, stepping aside (``step_aside``) before every ``every``-th one."""
    for n, item in enumerate(items):
        if not n % every:
            step_aside()
        yield item
