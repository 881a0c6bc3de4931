"""``magw top``'s terminal: curses (the standard library), one frame per interval, ``q`` quits.

Reading a frame takes time (a few ``ip`` commands per node); the interval counts from the start of one reading
to the start of the next, and a key pressed meanwhile is seen at the next wait. The screen is repainted whole;
lines longer than the terminal are clipped, lines below it are left out.
"""

from __future__ import annotations

import curses
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from magw.ops.show.inputs import Inputs
from magw.ops.top.frame import frame_doc, frame_lines

QUIT_KEYS = (ord("q"), ord("Q"))


def _fit(win: curses.window) -> bool:
    """Make curses' size the terminal's own (``TIOCGWINSZ`` of stdout): under some parents (a tmux server started
    from pytest) curses started at 80x24 in a 160x60 pane, and a resize is seen here too. True when it changed."""
    try:
        size = os.get_terminal_size(sys.stdout.fileno())
    except OSError:
        return False
    if (size.lines, size.columns) == win.getmaxyx():
        return False
    curses.resizeterm(size.lines, size.columns)
    return True


def _draw(win: curses.window, lines: Sequence[str]) -> None:
    _fit(win)
    height, width = win.getmaxyx()
    # clear, not erase: every cell repainted each frame. After a resize curses' idea of what the screen holds is
    # wrong (in tmux, rows past the old size kept only the cells that changed); once a second costs nothing.
    win.clear()
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
