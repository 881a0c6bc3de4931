"""The Globalnet daemon's turns on the trigger loop (file broker): a failed pass is retried with the
Globalnet backoff and logged as ``globalnet.pass_failed``; a replica without the lease waits a third of the
lease duration between looks, runs no pass meanwhile, and takes over once the lease is free."""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from magw.controllers.globalnet.controller import GlobalnetPassResult
from magw.daemons.globalnet.app import Daemon
from magw.sources.file.lease import FileLease
from tests.support.globalnet_broker import make_broker, put, statuses


def _args(broker: Path, lease_duration: float) -> argparse.Namespace:
    return argparse.Namespace(
        broker_dir=broker,
        cluster="east",
        identity="gn1",
        lease_duration=lease_duration,
        gateway_grace=300.0,
        resync=10.0,
        poll_interval=0.01,
    )


async def _until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.fixture
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    with capture_logs() as captured:
        yield captured


async def test_a_failing_pass_is_retried_with_the_globalnet_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: list[MutableMapping[str, Any]]
) -> None:
    """Two passes raise OSError: each is logged as globalnet.pass_failed, retried after 0.1 s then 0.2 s (the
    documented 0.1 s doubling), in the daemon's one worker thread; the third pass succeeds, and passes go on (a
    third of the lease's duration apart at most); on stop the lease is released."""
    daemon = Daemon(_args(make_broker(tmp_path / "broker"), lease_duration=6.0))
    calls: list[str] = []

    def flaky() -> GlobalnetPassResult:
        calls.append(threading.current_thread().name)
        if len(calls) <= 2:
            raise OSError("broker: read-only file system")
        return GlobalnetPassResult(planned=False)

    monkeypatch.setattr(daemon.controller, "reconcile", flaky)
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    await _until(lambda: len(calls) >= 4)
    stop.set()
    assert await asyncio.wait_for(task, 5) == 0
    assert len(set(calls)) == 1 and calls[0].startswith("magw-globalnet")
    failed = [e for e in logs if e["event"] == "globalnet.pass_failed"]
    assert [(e["error"], e["retry_in"]) for e in failed] == [
        ("broker: read-only file system", 0.1),
        ("broker: read-only file system", 0.2),
    ]
    assert [e["event"] for e in logs if e["event"].startswith("globalnet.lease_")] == [
        "globalnet.lease_acquired",
        "globalnet.lease_released",
    ]
    assert FileLease(tmp_path / "broker", "globalnet-east", "other", 6.0).try_acquire()  # released


async def test_without_the_lease_the_daemon_waits_then_takes_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: list[MutableMapping[str, Any]]
) -> None:
    """Another replica holds the lease: the daemon logs globalnet.lease_waiting once and runs no pass, looking
    at the lease every lease_duration/3 (not every poll interval); once the lease is released it acquires it
    at its next look and passes begin."""
    broker = make_broker(tmp_path / "broker")
    other = FileLease(broker, "globalnet-east", "gn0", 2.4)
    assert other.try_acquire()
    daemon = Daemon(_args(broker, lease_duration=2.4))
    passes: list[int] = []
    looks: list[int] = []
    ensure = daemon._ensure_lease

    async def counted_ensure() -> bool:
        looks.append(1)
        return await ensure()

    monkeypatch.setattr(daemon, "_ensure_lease", counted_ensure)
    monkeypatch.setattr(daemon.controller, "reconcile", lambda: passes.append(1) or GlobalnetPassResult(planned=False))
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    await asyncio.sleep(1.0)  # a third of 2.4 s is 0.8 s: two looks, not the 100 a poll interval would make
    assert passes == [] and 1 <= len(looks) <= 2
    other.release()
    await _until(lambda: len(passes) >= 3)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert [e["event"] for e in logs if e["event"] == "globalnet.lease_waiting"] == ["globalnet.lease_waiting"]
    assert any(e["event"] == "globalnet.lease_acquired" for e in logs)


async def test_passes_follow_the_broker_not_a_poll_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: list[MutableMapping[str, Any]]
) -> None:
    """Resync and lease renewal 20 s away, a 10 ms poll interval: idle, the daemon makes no pass after its first
    ones (it made one every poll interval before: about 100 in this second); a GlobalEgressIP written into the
    broker is allocated in well under the 20 s, which only the broker's watch can have asked for; a rewrite
    with the same content makes no pass."""
    broker = make_broker(tmp_path / "broker")
    args = _args(broker, lease_duration=60.0)
    args.resync = 20.0
    daemon = Daemon(args)
    passes: list[int] = []
    reconcile = daemon.controller.reconcile

    def counted() -> GlobalnetPassResult:
        passes.append(1)
        return reconcile()

    monkeypatch.setattr(daemon.controller, "reconcile", counted)
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    try:
        await _until(lambda: any(e["event"] == "filebroker.initial_sync" for e in logs))
        await asyncio.sleep(0.3)  # the first passes settle (start, the broker's first snapshot)
        settled = len(passes)
        await asyncio.sleep(1.0)
        assert len(passes) == settled, "passes without any change"
        put(broker, "shop", "GlobalEgressIP", {"namespace": "ns", "name": "shop"})
        await _until(lambda: ("GlobalEgressIP", "ns", "shop") in statuses(broker), timeout=5.0)
        await asyncio.sleep(0.3)  # the pass that reads the controller's own write back, then quiet
        after_write = len(passes)
        put(broker, "shop", "GlobalEgressIP", {"namespace": "ns", "name": "shop"})  # same content, new file
        await asyncio.sleep(0.5)
        assert len(passes) == after_write, "a rewrite with the same content made a pass"
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 5) == 0
    assert settled <= 3 and after_write - settled <= 3
    assert not any(e["event"] == "filebroker.polling" for e in logs)
