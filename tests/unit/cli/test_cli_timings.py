"""magw apply --timings (magw.cli.timings): the phase line, and no failure when /proc cannot be read."""

from __future__ import annotations

import io
from pathlib import Path

from magw.cli.timings import PhaseClock, process_age


def test_startup_is_left_out_when_proc_is_unreadable(tmp_path: Path) -> None:
    """A missing or garbled stat file gives no startup phase instead of an exception (a tmpfs over /proc)."""
    garbled = tmp_path / "stat"
    garbled.write_text("1 (x) S\n")
    assert process_age(str(tmp_path / "missing")) is None
    assert process_age(str(garbled)) is None
    clock = PhaseClock(str(tmp_path / "missing"))
    clock.mark("load")
    out = io.StringIO()
    clock.report(out)
    cells = [cell.split()[0] for cell in out.getvalue().removeprefix("timings: ").split(", ")]
    assert cells == ["load", "total"]


def test_startup_comes_first_when_proc_is_readable() -> None:
    """With /proc/self/stat, the line starts with startup (a non-negative age) and ends with the total."""
    clock = PhaseClock()
    clock.mark("load")
    assert clock.phases["startup"] >= 0
    assert [cell.split()[0] for cell in clock.line().removeprefix("timings: ").split(", ")] == [
        "startup",
        "load",
        "total",
    ]
