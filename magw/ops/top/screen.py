"""``magw top``'s terminal: curses (the standard library), one frame per interval, ``q`` quits.

Reading a frame takes time (a few ``ip`` commands per node); the interval counts from the start of one reading
to the start of the next, and a key pressed meanwhile is seen at the next wait. The screen is redrawn whole;
lines longer than the terminal are clipped, lines below it are left out.
"""

from __future__ import annotations

import curses
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from magw.ops.show.inputs import Inputs
from magw.ops.top.frame import frame_doc, frame_lines

QUIT_KEYS = (ord("q"), ord("Q"))


def _draw(win: curses.window, lines: Sequence[str]) -> None:
    height, width = win.getmaxyx()
    win.erase()
    for y, line in enumerate(lines[: max(0, height - 1)]):
        win.addnstr(y, 0, line, max(0, width - 1))
    win.refresh()


def _loop(win: curses.window, read: Callable[[], Inputs], nodes: Sequence[str] | None, interval: float) -> int:
    curses.curs_set(0)
    before: Inputs | None = None
    while True:
        started = time.monotonic()
        now = read()
        _draw(win, frame_lines(frame_doc(before, now, nodes), datetime.now(UTC)))
        before = now
        wait_ms = max(10, int((interval - (time.monotonic() - started)) * 1000))
        win.timeout(wait_ms)
        key = win.getch()
        if key in QUIT_KEYS:
            return 0


def run_screen(read: Callable[[], Inputs], nodes: Sequence[str] | None, interval: float = 1.0) -> int:
    """Draw frames of ``read()`` every ``interval`` seconds until ``q``; 0."""
    return curses.wrapper(_loop, read, nodes, interval)
