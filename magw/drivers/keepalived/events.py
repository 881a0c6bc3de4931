"""keepalived's notify FIFO: its lines as typed events, read as an asyncio stream.

keepalived 2.2.7 writes one line per transition to ``vrrp_notify_fifo``::

    INSTANCE "web" MASTER 250
    GROUP "g" BACKUP 0

(kind, quoted name, state, priority). We read it with the FIFO opened read-write: keepalived closes and
reopens its end on every reload (SIGHUP), and a read-only reader would see end-of-file there and lose the
lines written before it reopened. A read-write reader never sees end-of-file and the kernel keeps what
keepalived wrote meanwhile (it opens its own end read-write as well, so lines written before we start
reading wait in the pipe too).
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import AsyncIterator
from typing import Literal

import attrs

State = Literal["MASTER", "BACKUP", "FAULT", "STOP"]
STATES: tuple[State, ...] = ("MASTER", "BACKUP", "FAULT", "STOP")
_LINE = re.compile(r'^(INSTANCE|GROUP) "([^"]*)" ([A-Z_]+)(?: (\d+))?$')
MAX_LINE = 4096


@attrs.frozen(kw_only=True)
class VrrpEvent:
    """One transition: an instance (or sync group) ``name`` entered ``state``; ``priority`` as reported."""

    kind: Literal["INSTANCE", "GROUP"]
    name: str
    state: State
    priority: int = 0


def parse_line(line: str) -> VrrpEvent | None:
    """The event of one FIFO line, or None for a line we do not know (keepalived adds kinds over time)."""
    m = _LINE.match(line.strip())
    if m is None or m.group(3) not in STATES:
        return None
    kind: Literal["INSTANCE", "GROUP"] = "INSTANCE" if m.group(1) == "INSTANCE" else "GROUP"
    state = STATES[STATES.index(m.group(3))]
    return VrrpEvent(kind=kind, name=m.group(2), state=state, priority=int(m.group(4) or 0))


def make_fifo(path: str) -> None:
    """Create the FIFO (mode 0600) unless it exists; refuse a path that is something else.

    We create it ourselves so that keepalived does not: a FIFO keepalived created is removed when it
    stops or reloads, and lines in flight go with it.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        os.mkfifo(path, 0o600)
        return
    if not stat.S_ISFIFO(st.st_mode):
        raise FileExistsError(f"{path} exists and is not a FIFO; refusing to use it as keepalived's notify FIFO")


async def read_events(path: str) -> AsyncIterator[VrrpEvent]:
    """Yield the events written to the FIFO ``path`` until cancelled; unknown lines are skipped."""
    make_fifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        while True:
            raw = await reader.readline()
            if not raw:
                return
            event = parse_line(raw.decode("utf-8", "replace"))
            if event is not None:
                yield event
    finally:
        transport.close()
