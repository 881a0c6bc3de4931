"""``magw apply --timings``: where the time of one command went, phase by phase.

    timings: startup 0.310 s, load 0.402 s, detect 0.021 s, plan 0.350 s, observe 0.610 s (2 calls),
    diff 0.480 s, apply 1.920 s, total 4.093 s

``startup`` is from the process's start (``/proc/self/stat``, 10 ms resolution) to the first
mark: interpreter, imports, argument parsing; it is left out when ``/proc`` cannot be read (e.g.
hidden by a tmpfs), and the command runs on. ``observe`` and ``apply`` are the driver's calls
(a sync observes again only after re-creating an object); ``diff`` is the rest of the
sync: diffing and printing the change lines (printed while the nft half of the apply already
runs in its thread, ``magw.reconcile.driver.StagedDriver``). benchmarks/end_to_end.py reads the line.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

import structlog

from magw.desired.state import DesiredState
from magw.reconcile.changeset import ChangeSet
from magw.reconcile.driver import ApplyResult, Driver, begin_apply

log = structlog.get_logger(__name__)


PROC_STAT = "/proc/self/stat"


def process_age(stat_path: str = PROC_STAT) -> float | None:
    """Seconds since this process started (kernel start time, in clock ticks since boot); None when unknown."""
    try:
        with open(stat_path, encoding="ascii") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(after_name[19])  # field 22 of proc(5); the first field after the name is field 3
    except (OSError, ValueError, IndexError):
        return None  # /proc hidden or not mounted: timings are a diagnostic, never a reason to fail
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")


class PhaseClock:
    """Marks the end of each phase; ``TimedDriver`` adds the driver's own calls."""

    def __init__(self, stat_path: str = PROC_STAT) -> None:
        age = process_age(stat_path)
        self.phases: dict[str, float] = {} if age is None else {"startup": age}
        self.calls: dict[str, int] = {}
        self._last = time.perf_counter()

    def mark(self, phase: str) -> None:
        """The time since the previous mark belongs to ``phase``."""
        now = time.perf_counter()
        self.add(phase, now - self._last)
        self._last = now

    def add(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def line(self) -> str:
        cells = []
        for phase, seconds in self.phases.items():
            calls = self.calls.get(phase)
            cells.append(f"{phase} {seconds:.3f} s" + (f" ({calls} calls)" if calls and calls > 1 else ""))
        cells.append(f"total {sum(self.phases.values()):.3f} s")
        return "timings: " + ", ".join(cells)

    def report(self, out: TextIO = sys.stderr) -> None:
        """One ``timings:`` line on ``out`` and an ``apply.timings`` event (seconds, flat keys)."""
        print(self.line(), file=out, flush=True)
        log.info("apply.timings", **{f"{phase}_s": round(s, 4) for phase, s in self.phases.items()})


class TimedDriver:
    """A Driver that times ``observe`` and ``apply`` into a PhaseClock; the rest of a sync counts as ``diff``."""

    def __init__(self, driver: Driver, clock: PhaseClock) -> None:
        self._driver = driver
        self._clock = clock

    def observe(self) -> DesiredState:
        self._clock.mark("diff")  # the time since the previous mark was the sync's own work
        state = self._driver.observe()
        self._count("observe")
        return state

    def apply(self, changes: ChangeSet) -> ApplyResult:
        return self.begin_apply(changes)()

    def begin_apply(self, changes: ChangeSet) -> Callable[[], ApplyResult]:
        """The wrapped driver's ``begin_apply``: the time until ``finish`` is called (the sync printing its lines
        while the nft thread runs) counts as ``diff``, as it did before the apply started early."""
        self._clock.mark("diff")
        finish_wrapped = begin_apply(self._driver, changes)
        self._clock.mark("apply")  # counted as a call once, when it finishes

        def finish() -> ApplyResult:
            self._clock.mark("diff")
            result = finish_wrapped()
            self._count("apply")
            return result

        return finish

    def _count(self, phase: str) -> None:
        self._clock.mark(phase)
        self._clock.calls[phase] = self._clock.calls.get(phase, 0) + 1
