"""FileLease: one holder at a time, renewal, expiry, release, takeover; two processes racing."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from magw.sources.file.broker import FileBroker
from magw.sources.file.lease import FileLease


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_holder_renewal_expiry_and_takeover(tmp_path: Path) -> None:
    clock = Clock()
    a = FileLease(tmp_path, "globalnet-east", "a", 6.0, clock)
    b = FileLease(tmp_path, "globalnet-east", "b", 6.0, clock)
    assert a.try_acquire()
    assert not b.try_acquire(), "held by a"
    clock.now += 5
    assert a.try_acquire(), "a renews"
    clock.now += 5
    assert not b.try_acquire(), "renewed 5 s ago: still a's"
    clock.now += 1.5
    assert b.try_acquire(), "a stopped renewing: expired, b takes it"
    record = b.read()
    assert record is not None and record.holder == "b" and record.transitions == 1
    assert not a.try_acquire(), "a lost it"


def test_release_frees_at_once(tmp_path: Path) -> None:
    clock = Clock()
    a = FileLease(tmp_path, "l", "a", 60.0, clock)
    b = FileLease(tmp_path, "l", "b", 60.0, clock)
    assert a.try_acquire()
    b.release()  # not b's: nothing happens
    assert not b.try_acquire()
    a.release()
    assert b.try_acquire()


def test_the_broker_ignores_the_lease_document(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "kind: Cluster\nid: east\npod_cidrs: [10.1.0.0/16]\nservice_cidrs: [100.1.0.0/16]\n"
    )
    assert FileLease(tmp_path, "globalnet-east", "a", 5.0).try_acquire()
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None and broker.problem_files() == frozenset()


def _race(directory: str, holder: str, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    lease = FileLease(directory, "race", holder, 60.0)
    results.put((holder, lease.try_acquire()))


def test_two_processes_racing_one_wins(tmp_path: Path) -> None:
    """Eight rounds of two processes started together: exactly one of each round holds the lease."""
    ctx = multiprocessing.get_context("fork")
    for round_ in range(8):
        directory = tmp_path / f"r{round_}"
        directory.mkdir()
        results: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
        procs = [ctx.Process(target=_race, args=(str(directory), h, results)) for h in ("a", "b")]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=30)
        won = [results.get(timeout=5) for _ in procs]
        assert sorted(ok for _, ok in won) == [False, True], won
