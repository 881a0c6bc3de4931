"""``magw diagnose kernel`` without ``--netns`` creates nothing in a namespace that may be the host's.

A throwaway namespace plays the host: the test runs ``diagnose`` in it (this thread moved there) with the
guard's question, "is this the host's initial namespace?", answered "cannot tell" as it is in a container or
sandbox. ``ip monitor nexthop`` there must print no event between two sentinels, and the nexthops and routes
are the same before and after. The same run with the answer "no" does create its probe objects (and deletes
them): the monitor sees them, so the first check could fail.
"""

from __future__ import annotations

import argparse
import queue
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from magw.cli import diagnose
from magw.drivers.netns import in_netns
from tests.support.netns import ip_json, run

pytestmark = pytest.mark.kernel

SENTINELS = range(4000, 4100)  # nexthop ids far below the probes' (the top of magw's range)
SENTINEL_IDS = iter(SENTINELS)


class NexthopMonitor:
    """``ip -o monitor nexthop`` in a namespace; ``between()`` returns the events since the previous sentinel."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self._lines: queue.Queue[str] = queue.Queue()
        self._proc = subprocess.Popen(["ip", "-o", "-n", ns, "monitor", "nexthop"], stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))

    def between(self, wait: float = 10.0) -> list[str]:
        """Add a sentinel nexthop and collect every event until the monitor prints it (retried until the monitor
        has subscribed); the sentinels' own lines are left out."""
        seen: list[str] = []
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            nh_id = next(SENTINEL_IDS)
            run(self.ns, "ip", "nexthop", "add", "id", str(nh_id), "blackhole")
            mark = f"id {nh_id} "
            until = time.monotonic() + 0.5
            while (left := until - time.monotonic()) > 0:
                try:
                    line = self._lines.get(timeout=left)
                except queue.Empty:
                    break
                if mark in line:
                    return [e for e in seen if not any(f"id {i} " in e for i in SENTINELS)]
                seen.append(line)
        raise AssertionError(f"ip monitor nexthop in {self.ns} never printed a sentinel")

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)


@pytest.fixture
def monitor(ns: str) -> Iterator[NexthopMonitor]:
    watcher = NexthopMonitor(ns)
    try:
        yield watcher
    finally:
        watcher.close()


def _diagnose_as_host(
    ns: str, monitor: NexthopMonitor, monkeypatch: pytest.MonkeyPatch, refusal: str | None
) -> tuple[list[str], bool]:
    """Run ``magw diagnose kernel`` (no --netns) with this thread in ``ns``; (its nexthop events, whether the
    nexthop and route dumps came out unchanged)."""
    # raising=False: a diagnose that never asks the guard still runs, and is judged by what it did
    monkeypatch.setattr(diagnose, "current_netns_refusal", lambda doing, **kw: refusal, raising=False)
    monitor.between()  # subscribed, and nothing pending
    before = (ip_json(ns, "nexthop", "show"), ip_json(ns, "route", "show", "table", "all"))
    with in_netns(ns):
        assert diagnose.run(argparse.Namespace(netns=None, json=False)) == 0
    after = (ip_json(ns, "nexthop", "show"), ip_json(ns, "route", "show", "table", "all"))
    return monitor.between(), before == after


def test_diagnose_creates_nothing_where_the_namespace_may_be_the_hosts(
    ns: str, monitor: NexthopMonitor, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """"Cannot tell whether this is the host's namespace": no nexthop event at all, dumps unchanged, and the
    report still says what the kernel supports (inferred from dumps, and a note says so)."""
    events, unchanged = _diagnose_as_host(
        ns, monitor, monkeypatch, "refusing to probe: cannot tell whether this is the host's initial namespace"
    )
    out = capsys.readouterr().out
    assert (events, unchanged) == ([], True)
    assert "nexthop objects: yes" in out and "note: dry run: resilient groups inferred" in out


def test_diagnose_probes_where_the_namespace_is_known_not_to_be_the_hosts(
    ns: str, monitor: NexthopMonitor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Known to be another namespace: the probe objects are created and deleted again (the monitor sees both),
    so the check above would see them."""
    events, unchanged = _diagnose_as_host(ns, monitor, monkeypatch, None)
    assert unchanged
    assert any(e.startswith("Deleted") for e in events) and any(not e.startswith("Deleted") for e in events)
