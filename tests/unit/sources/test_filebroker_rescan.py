"""The file broker's rescans: only changed content is parsed, and polling runs off the event loop.

A heartbeat (``os.utime``) changes a file's mtime, not its content: the broker re-reads the file but
neither parses it again nor re-assembles the snapshot. ``run()`` does its passes in a worker thread, so
the loop that also carries the health probes keeps running during a slow rescan; listeners are called on
the loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from magw.model import Endpoint, Snapshot
from magw.snapshot.load import parse_snapshot
from magw.sources import FileBroker, endpoint_path, publish_endpoint
from magw.sources.file import broker as filebroker_module
from tests.support.filebroker_world import E_GW1, W_GW1, expected_snapshot, populate

LIMIT = 10.0  # seconds: safety limit of every wait, never reached when the loop keeps running


class Counting:
    """Counts the calls of the document parser (per file) and of the snapshot parser (assemblies)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files: list[str] = []
        self.assemblies = 0
        real = filebroker_module.parse_file

        def parse_file(text: str, *, file: str) -> Any:
            self.files.append(file)
            return real(text, file=file)

        monkeypatch.setattr(filebroker_module, "parse_file", parse_file)

    def parse(self, doc: Any, **kwargs: Any) -> Snapshot:
        self.assemblies += 1
        return parse_snapshot(doc, **kwargs)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counting]:
    yield Counting(monkeypatch)


def later(path: Path, seconds: float) -> None:
    """Set the file's mtime ``seconds`` after its current one (a heartbeat, without waiting)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + int(seconds * 1e9)))


def test_a_heartbeat_touch_is_neither_parsed_nor_assembled(tmp_path: Path, counting: Counting) -> None:
    """After the first scan, touching an endpoint file (new mtime, same bytes) parses nothing and
    assembles nothing; the snapshot stays the same object."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east", parse=counting.parse)
    assert broker.scan() is True
    first = broker.snapshot
    parsed, assembled = len(counting.files), counting.assemblies
    for seconds in (1.0, 2.0, 3.0):
        later(endpoint_path(tmp_path, "east", "e-gw1"), seconds)
        assert broker.scan() is False
    assert (len(counting.files) - parsed, counting.assemblies - assembled) == (0, 0)
    assert broker.snapshot is first


def test_a_republish_of_the_same_document_is_not_parsed_again(tmp_path: Path, counting: Counting) -> None:
    """publish_endpoint with the same Endpoint writes a new file (new inode) with the same bytes: no parse."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east", parse=counting.parse)
    broker.scan()
    parsed, assembled = len(counting.files), counting.assemblies
    publish_endpoint(tmp_path, E_GW1)
    assert broker.scan() is False
    assert (len(counting.files) - parsed, counting.assemblies - assembled) == (0, 0)


def test_a_changed_file_is_the_only_one_parsed(tmp_path: Path, counting: Counting) -> None:
    """A new public IP for e-gw1: that one file is parsed again, the snapshot is assembled and changes."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east", parse=counting.parse)
    broker.scan()
    parsed = len(counting.files)
    moved = Endpoint(cluster="east", hostname="e-gw1", private_ip=IPv4Address("172.18.0.6"))
    publish_endpoint(tmp_path, moved)
    assert broker.scan() is True
    assert counting.files[parsed:] == ["endpoint-east@e-gw1.yaml"]
    assert broker.snapshot == expected_snapshot(moved, W_GW1)


def test_a_touch_still_renews_an_expired_endpoint(tmp_path: Path, counting: Counting) -> None:
    """The heartbeat is still seen: an endpoint expired by its TTL (west's w-gw2 being fresh) comes back when its
    file is touched (re-assembled, not re-parsed)."""
    populate(tmp_path)
    w_gw2 = Endpoint(cluster="west", hostname="w-gw2", private_ip=IPv4Address("172.19.0.5"))
    publish_endpoint(tmp_path, w_gw2)
    path = endpoint_path(tmp_path, "west", "w-gw1")
    now = [path.stat().st_mtime]
    broker = FileBroker(tmp_path, local_cluster="east", parse=counting.parse, endpoint_ttl=5, wall_clock=lambda: now[0])
    broker.scan()
    now[0] += 6
    later(endpoint_path(tmp_path, "east", "e-gw1"), 6)
    later(endpoint_path(tmp_path, "west", "w-gw2"), 6)
    assert broker.scan() is True
    assert broker.snapshot == expected_snapshot(E_GW1, w_gw2)
    parsed = len(counting.files)
    later(path, 6)
    assert broker.scan() is True
    assert broker.snapshot == expected_snapshot(E_GW1, W_GW1, w_gw2)
    assert len(counting.files) == parsed


async def test_run_rescans_in_a_worker_thread_and_notifies_on_the_loop(tmp_path: Path) -> None:
    """A slow assembly (it waits for five ticks of the loop) runs off the loop's thread while the loop
    ticks; the listener hears of the snapshot on the loop's thread."""
    populate(tmp_path)
    loop_thread = threading.current_thread()
    gate = threading.Event()
    parses: list[tuple[bool, bool]] = []
    heard: list[bool] = []

    def slow_parse(doc: Any, **kwargs: Any) -> Snapshot:
        parses.append((threading.current_thread() is not loop_thread, gate.wait(LIMIT)))
        return parse_snapshot(doc, **kwargs)

    async def tick() -> None:
        for _ in range(5):
            await asyncio.sleep(0.001)
        gate.set()

    broker = FileBroker(tmp_path, local_cluster="east", poll_interval=0.01, parse=slow_parse)
    broker.subscribe(lambda _snapshot: heard.append(threading.current_thread() is loop_thread))
    ticker = asyncio.create_task(tick())
    task = asyncio.create_task(broker.run())
    try:
        for _ in range(int(LIMIT * 1000)):  # bounded: until the first snapshot was heard
            if heard:
                break
            await asyncio.sleep(0.001)
    finally:
        broker.stop()
        await asyncio.wait_for(task, LIMIT)
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
    assert parses[0] == (True, True)
    assert heard == [True]
    assert broker.snapshot == expected_snapshot(E_GW1, W_GW1)
