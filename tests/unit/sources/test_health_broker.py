"""Broker convergence after a failure: Endpoint documents not touched within the TTL leave the snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from magw.sources import FileBroker, endpoint_path
from tests.support.filebroker_world import E_GW1, W_GW1, populate

TTL = 5.0


def broker_at(directory: Path, now: list[float]) -> FileBroker:
    return FileBroker(directory, local_cluster="east", endpoint_ttl=TTL, wall_clock=lambda: now[0])


def hostnames(broker: FileBroker) -> list[str]:
    assert broker.snapshot is not None
    return [e.hostname for e in broker.snapshot.endpoints]


def test_endpoint_older_than_the_ttl_is_gone_and_returns_when_touched(tmp_path: Path) -> None:
    """w-gw1's document untouched for TTL + 1 s leaves the snapshot (logged once); a touch brings it back.
    Non-endpoint documents never expire."""
    populate(tmp_path)
    stale = endpoint_path(tmp_path, "west", "w-gw1")
    mtime = stale.stat().st_mtime
    for path in tmp_path.iterdir():  # everything old except e-gw1's heartbeat
        if path != endpoint_path(tmp_path, "east", "e-gw1"):
            os.utime(path, (mtime - 100, mtime - 100))
    now = [mtime]
    broker = broker_at(tmp_path, now)
    with capture_logs() as logs:
        assert broker.scan() is True
        assert hostnames(broker) == ["e-gw1"]
        assert broker.scan() is False
        os.utime(stale, (now[0], now[0]))
        assert broker.scan() is True
    assert hostnames(broker) == ["e-gw1", "w-gw1"]
    assert [(e["event"], e.get("file")) for e in logs if e["event"].startswith("filebroker.endpoint")] == [
        ("filebroker.endpoint_expired", "endpoint-west@w-gw1.yaml"),
        ("filebroker.endpoint_renewed", "endpoint-west@w-gw1.yaml"),
    ]
    assert broker.snapshot is not None and len(broker.snapshot.nodes) == 2


def test_expiry_happens_with_time_alone(tmp_path: Path) -> None:
    """Nothing in the directory changes; the clock passing the TTL is enough for the next scan to drop both."""
    populate(tmp_path)
    now = [endpoint_path(tmp_path, "east", "e-gw1").stat().st_mtime + 1]
    broker = broker_at(tmp_path, now)
    broker.scan()
    assert broker.snapshot is not None and broker.snapshot.endpoints == (E_GW1, W_GW1)
    now[0] += TTL
    assert broker.scan() is True
    assert hostnames(broker) == []


def test_without_ttl_documents_never_expire(tmp_path: Path) -> None:
    """The library default (no TTL) keeps static Endpoint documents, as before."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east", wall_clock=lambda: 1e12)
    broker.scan()
    assert hostnames(broker) == ["e-gw1", "w-gw1"]


def test_bad_ttl_is_one_line() -> None:
    """A TTL that is not positive is refused, naming the field."""
    with pytest.raises(ValueError) as info:
        FileBroker("/nonexistent", local_cluster="east", endpoint_ttl=0)
    assert str(info.value) == "endpoint_ttl: must be > 0 seconds (or None: never), got 0"
