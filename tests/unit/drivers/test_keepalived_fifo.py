"""keepalived's notify FIFO lines as events (magw.drivers.keepalived.events), and the async reader."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from magw.drivers.keepalived.events import VrrpEvent, make_fifo, parse_line, read_events


@pytest.mark.parametrize(
    ("line", "event"),
    [
        ('INSTANCE "web" MASTER 250\n', VrrpEvent(kind="INSTANCE", name="web", state="MASTER", priority=250)),
        ('INSTANCE "db.x-1" BACKUP 126', VrrpEvent(kind="INSTANCE", name="db.x-1", state="BACKUP", priority=126)),
        ('INSTANCE "web" FAULT 250', VrrpEvent(kind="INSTANCE", name="web", state="FAULT", priority=250)),
        ('INSTANCE "web" STOP 250', VrrpEvent(kind="INSTANCE", name="web", state="STOP", priority=250)),
        ('GROUP "g" MASTER 0', VrrpEvent(kind="GROUP", name="g", state="MASTER", priority=0)),
        ('INSTANCE "web" MASTER', VrrpEvent(kind="INSTANCE", name="web", state="MASTER", priority=0)),
    ],
)
def test_parse_known_lines(line: str, event: VrrpEvent) -> None:
    assert parse_line(line) == event


@pytest.mark.parametrize(
    "line",
    [
        "",
        "garbage",
        'INSTANCE "web" MASTER_RX_LOWER_PRI 250',
        "INSTANCE web MASTER 250",
        'VS "x" UP',
        'INSTANCE "w" master 1',
    ],
)
def test_unknown_lines_are_none(line: str) -> None:
    assert parse_line(line) is None


def test_make_fifo_refuses_a_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(FileExistsError):
        make_fifo(str(f))
    make_fifo(str(tmp_path / "p"))
    make_fifo(str(tmp_path / "p"))  # idempotent


async def test_reader_survives_a_writer_that_closes_and_reopens(tmp_path: Path) -> None:
    """keepalived reopens its end on reload; lines written after that still arrive (no end-of-file)."""
    path = str(tmp_path / "fifo")
    make_fifo(path)
    got: list[VrrpEvent] = []

    async def consume() -> None:
        async for ev in read_events(path):
            got.append(ev)
            if len(got) == 3:
                return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)  # the task runs up to its first suspension: the reader's end is open by then

    async def seen(n: int) -> None:
        while len(got) < n:
            await asyncio.sleep(0.01)

    for n, text in enumerate(
        ('INSTANCE "a" BACKUP 1\nnoise\n', 'INSTANCE "a" MASTER 1\n', 'INSTANCE "b" FAULT 2\n'), 1
    ):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, text.encode())
        os.close(fd)  # keepalived's reload; a read-only reader would see end-of-file once it has read the line
        await asyncio.wait_for(seen(n), 10)  # read before the next writer opens
    await asyncio.wait_for(task, 10)
    assert [(e.name, e.state) for e in got] == [("a", "BACKUP"), ("a", "MASTER"), ("b", "FAULT")]
