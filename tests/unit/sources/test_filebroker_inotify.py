"""The file broker follows its directory with inotify (magw.sources.file.wakeup): a pass when a document changes,
when an Endpoint's heartbeat runs out, and a slow full pass; polling when inotify cannot be had.

Each test sets the intervals so that only the mechanism under test can make the pass it waits for: with
``rescan_interval=60`` a change seen within the 10 s safety limit was seen through the watch (or the TTL timer)."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from magw.model import Endpoint, Snapshot
from magw.sources import FileBroker, endpoint_path, publish_endpoint
from magw.sources.file import wakeup as wakeup_module
from tests.support.filebroker_world import E_GW1, W_GW1, A, expected_snapshot, populate, write

LIMIT = 10.0  # seconds: a safety limit, far below the 60 s intervals that would otherwise make the pass
SLOW = 60.0
W_GW2 = Endpoint(cluster="west", hostname="w-gw2", private_ip=A("172.19.0.9"))
E_W2 = "{kind: Node, cluster: east, name: e-w2, ip: 172.18.0.7, cni_ip: 10.1.4.1}\n"


async def wait_for(predicate: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + LIMIT
    while not predicate():
        assert loop.time() < end, f"not within {LIMIT} s: {what}"
        await asyncio.sleep(0.01)


class Running:
    """``broker.run()`` as a task, with every snapshot its listener heard and the number of passes it made."""

    def __init__(self, broker: FileBroker) -> None:
        self.broker = broker
        self.seen: list[Snapshot | None] = []
        self.passes = 0
        listing = broker._listing

        def counted() -> dict[str, tuple[int, int, int]] | None:
            self.passes += 1
            return listing()

        broker._listing = counted  # type: ignore[method-assign]
        broker.subscribe(self.seen.append)
        self.task = asyncio.create_task(broker.run())

    async def stop(self) -> None:
        self.broker.stop()
        await asyncio.wait_for(self.task, LIMIT)


def logged(logs: list[dict[str, object]], name: str) -> list[dict[str, object]]:
    return [e for e in logs if e["event"] == name]


async def across_a_publish(broker: FileBroker) -> tuple[list[Snapshot | None], list[dict[str, object]]]:
    """Run the broker of a ``populate``d directory and publish w-gw2 after its first snapshot: the snapshots its
    listener heard, and the log events."""
    populate(broker.directory)
    with capture_logs() as logs:
        running = Running(broker)
        try:
            await wait_for(lambda: len(running.seen) == 1, "the first snapshot")
            publish_endpoint(broker.directory, W_GW2)
            await wait_for(lambda: len(running.seen) == 2, "the published endpoint")
        finally:
            await running.stop()
    return running.seen, logs


async def test_a_change_is_seen_through_the_watch_not_a_poll(tmp_path: Path) -> None:
    seen, logs = await across_a_publish(
        FileBroker(tmp_path, local_cluster="east", poll_interval=SLOW, rescan_interval=SLOW)
    )
    assert seen == [expected_snapshot(E_GW1, W_GW1), expected_snapshot(E_GW1, W_GW1, W_GW2)]
    assert [e["rescan_interval"] for e in logged(logs, "filebroker.watching")] == [SLOW]
    assert logged(logs, "filebroker.polling") == []


async def test_files_the_broker_does_not_read_and_heartbeats_of_fresh_files_wake_nothing(tmp_path: Path) -> None:
    """A temp file (dot-file), a non-YAML file and a touch of a fresh Endpoint file (a heartbeat) make no pass; the
    rename that completes a write does."""
    populate(tmp_path)
    running = Running(FileBroker(tmp_path, local_cluster="east", poll_interval=SLOW, rescan_interval=SLOW))
    try:
        await wait_for(lambda: len(running.seen) == 1, "the first snapshot")
        passes = running.passes
        (tmp_path / ".endpoint-west@w-gw2.yaml.tmp").write_text("half")
        (tmp_path / "README.txt").write_text("notes")
        os.utime(tmp_path / "README.txt")
        await asyncio.sleep(0.3)  # room for a wrong pass to happen: the events above are already queued
        assert running.passes == passes
        os.utime(endpoint_path(tmp_path, "west", "w-gw1"))  # a heartbeat, read at the next pass, whenever
        await asyncio.sleep(0.3)  # room for a wrong pass to happen: the events above are already queued
        assert running.passes == passes
        publish_endpoint(tmp_path, W_GW2)
        await wait_for(lambda: running.passes > passes, "a pass after the rename")
        await wait_for(lambda: len(running.seen) == 2, "the published endpoint")
    finally:
        await running.stop()


async def test_an_endpoint_whose_heartbeat_stops_expires_on_time_without_any_event(tmp_path: Path) -> None:
    """No event marks a heartbeat's absence: the broker wakes itself when the oldest fresh Endpoint file goes
    stale. w-gw2's file is dated ahead, so w-gw1's is the one to expire (west keeps a fresh Endpoint)."""
    populate(tmp_path)
    publish_endpoint(tmp_path, W_GW2)
    ahead = endpoint_path(tmp_path, "west", "w-gw2").stat().st_mtime + SLOW
    os.utime(endpoint_path(tmp_path, "west", "w-gw2"), (ahead, ahead))
    broker = FileBroker(tmp_path, local_cluster="east", poll_interval=SLOW, rescan_interval=SLOW, endpoint_ttl=1.0)
    with capture_logs() as logs:
        running = Running(broker)
        try:
            await wait_for(lambda: len(running.seen) == 2, "w-gw1 expired")
        finally:
            await running.stop()
    assert running.seen == [expected_snapshot(E_GW1, W_GW1, W_GW2), expected_snapshot(E_GW1, W_GW2)]
    assert [e["file"] for e in logged(logs, "filebroker.endpoint_expired")] == ["endpoint-west@w-gw1.yaml"]


async def test_a_touch_renews_a_stale_endpoint_at_once(tmp_path: Path) -> None:
    """The touch of a stale file is the one heartbeat that wakes the broker: its Endpoint comes back."""
    populate(tmp_path)
    publish_endpoint(tmp_path, W_GW2)
    ahead = endpoint_path(tmp_path, "west", "w-gw2").stat().st_mtime + SLOW
    os.utime(endpoint_path(tmp_path, "west", "w-gw2"), (ahead, ahead))
    stale = endpoint_path(tmp_path, "west", "w-gw1")
    os.utime(stale, (ahead - 2 * SLOW, ahead - 2 * SLOW))  # stale from the start
    broker = FileBroker(tmp_path, local_cluster="east", poll_interval=SLOW, rescan_interval=SLOW, endpoint_ttl=1.0)
    with capture_logs() as logs:
        running = Running(broker)
        try:
            await wait_for(lambda: len(running.seen) == 1, "the first snapshot")
            os.utime(stale)
            await wait_for(lambda: len(running.seen) == 2, "w-gw1 renewed")
        finally:
            await running.stop()
    assert running.seen == [expected_snapshot(E_GW1, W_GW2), expected_snapshot(E_GW1, W_GW1, W_GW2)]
    assert [e["file"] for e in logged(logs, "filebroker.endpoint_renewed")] == ["endpoint-west@w-gw1.yaml"]


async def test_without_inotify_the_broker_polls_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def used_up(directory: object, suffixes: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(wakeup_module, "DirWatch", used_up)
    seen, logs = await across_a_publish(
        FileBroker(tmp_path, local_cluster="east", poll_interval=0.02, rescan_interval=SLOW)
    )
    assert seen == [expected_snapshot(E_GW1, W_GW1), expected_snapshot(E_GW1, W_GW1, W_GW2)]  # by polling
    (polling,) = logged(logs, "filebroker.polling")
    assert polling["interval"] == 0.02
    assert "fs.inotify.max_user_instances" in str(polling["reason"])
    assert logged(logs, "filebroker.watching") == []


async def test_a_directory_replaced_is_watched_again(tmp_path: Path) -> None:
    """The directory is moved away and a new one put in its place: the lost watch is seen, the broker polls while
    no directory is there, then watches the new one, and a later change in it is seen through the new watch."""
    directory = tmp_path / "broker"
    directory.mkdir()
    populate(directory)
    with capture_logs() as logs:
        running = Running(FileBroker(directory, local_cluster="east", poll_interval=0.02, rescan_interval=SLOW))
        try:
            await wait_for(lambda: len(running.seen) == 1, "the first snapshot")
            directory.rename(tmp_path / "broker.old")
            await wait_for(lambda: bool(logged(logs, "filebroker.watch_lost")), "the lost watch")
            fresh = tmp_path / "broker.new"
            fresh.mkdir()
            populate(fresh)
            publish_endpoint(fresh, W_GW2)
            fresh.rename(directory)
            await wait_for(lambda: len(running.seen) == 2, "the new directory's snapshot")
            await wait_for(lambda: len(logged(logs, "filebroker.watching")) == 2, "a watch on the new directory")
            # armed again: from here on a wait lasts up to rescan_interval (60 s), so only the watch can end it
            write(directory, "node-e-w2.yaml", E_W2)
            await wait_for(lambda: len(running.seen) == 3, "a change in the new directory")
        finally:
            await running.stop()
    assert running.seen[1] == expected_snapshot(E_GW1, W_GW1, W_GW2)
    assert running.seen[2] is not None
    assert [n.name for n in running.seen[2].nodes] == ["e-gw1", "e-w1", "e-w2"]


async def test_inotify_turned_off_polls_and_says_so_at_info(tmp_path: Path) -> None:
    seen, logs = await across_a_publish(
        FileBroker(tmp_path, local_cluster="east", poll_interval=0.02, rescan_interval=SLOW, use_inotify=False)
    )
    assert seen == [expected_snapshot(E_GW1, W_GW1), expected_snapshot(E_GW1, W_GW1, W_GW2)]  # by polling
    (polling,) = logged(logs, "filebroker.polling")
    assert (polling["log_level"], polling["reason"]) == ("info", wakeup_module.TURNED_OFF)
    assert logged(logs, "filebroker.watching") == []
