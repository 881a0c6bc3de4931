"""Broker convergence after a failure: Endpoint documents not touched within the TTL leave the snapshot, unless
no Endpoint of their cluster is fresh (fail static, magw.sources.file.expiry)."""

from __future__ import annotations

import os
from ipaddress import IPv4Address
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from magw.model import Endpoint
from magw.sources import FileBroker, endpoint_path, publish_endpoint
from tests.support.filebroker_world import populate

TTL = 5.0


def broker_at(directory: Path, now: list[float]) -> FileBroker:
    return FileBroker(directory, local_cluster="east", endpoint_ttl=TTL, wall_clock=lambda: now[0])


def hostnames(broker: FileBroker) -> list[str]:
    assert broker.snapshot is not None
    return [e.hostname for e in broker.snapshot.endpoints]


W_GW2 = Endpoint(cluster="west", hostname="w-gw2", private_ip=IPv4Address("172.19.0.5"))


def _endpoint_events(logs: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(e["event"], e.get("file")) for e in logs if str(e["event"]).startswith("filebroker.endpoint")]


def test_endpoint_older_than_the_ttl_is_gone_and_returns_when_touched(tmp_path: Path) -> None:
    """w-gw1's document untouched for TTL + 1 s leaves the snapshot (logged once) while west's w-gw2 is fresh; a
    touch brings it back. Non-endpoint documents never expire."""
    populate(tmp_path)
    publish_endpoint(tmp_path, W_GW2)
    stale = endpoint_path(tmp_path, "west", "w-gw1")
    mtime = stale.stat().st_mtime
    fresh = {endpoint_path(tmp_path, "east", "e-gw1"), endpoint_path(tmp_path, "west", "w-gw2")}
    for path in tmp_path.iterdir():  # everything old except the heartbeats of e-gw1 and w-gw2
        if path not in fresh:
            os.utime(path, (mtime - 100, mtime - 100))
    now = [mtime]
    broker = broker_at(tmp_path, now)
    with capture_logs() as logs:
        assert broker.scan() is True
        assert hostnames(broker) == ["e-gw1", "w-gw2"]
        assert broker.scan() is False
        os.utime(stale, (now[0], now[0]))
        assert broker.scan() is True
    assert hostnames(broker) == ["e-gw1", "w-gw1", "w-gw2"]
    assert _endpoint_events(logs) == [
        ("filebroker.endpoint_expired", "endpoint-west@w-gw1.yaml"),
        ("filebroker.endpoint_renewed", "endpoint-west@w-gw1.yaml"),
    ]
    assert broker.snapshot is not None and len(broker.snapshot.nodes) == 2


def test_a_clusters_last_fresh_endpoint_keeps_its_stale_ones(tmp_path: Path) -> None:
    """Fail static: a stale Endpoint expires only while its cluster has a fresh one. With time alone: w-gw1 goes
    stale first and expires (w-gw2 is fresh); when w-gw2 goes stale too, west has no fresh Endpoint and both are
    kept (logged once each); e-gw1, east's only one, is kept all along. A fresh touch of w-gw2 expires w-gw1 again."""
    populate(tmp_path)
    publish_endpoint(tmp_path, W_GW2)
    t0 = endpoint_path(tmp_path, "east", "e-gw1").stat().st_mtime
    os.utime(endpoint_path(tmp_path, "west", "w-gw1"), (t0 - 3, t0 - 3))
    os.utime(endpoint_path(tmp_path, "west", "w-gw2"), (t0, t0))
    now = [t0 + 1]
    broker = broker_at(tmp_path, now)
    with capture_logs() as logs:
        broker.scan()
        assert hostnames(broker) == ["e-gw1", "w-gw1", "w-gw2"]
        now[0] = t0 + TTL - 1  # w-gw1 stale (TTL + 2 s old), w-gw2 fresh, e-gw1 fresh
        assert broker.scan() is True
        assert hostnames(broker) == ["e-gw1", "w-gw2"]
        now[0] = t0 + TTL + 1  # all stale: each cluster keeps every Endpoint it has
        assert broker.scan() is True
        assert hostnames(broker) == ["e-gw1", "w-gw1", "w-gw2"]
        assert broker.scan() is False
        os.utime(endpoint_path(tmp_path, "west", "w-gw2"), (now[0], now[0]))
        assert broker.scan() is True
        assert hostnames(broker) == ["e-gw1", "w-gw2"]
    assert _endpoint_events(logs) == [
        ("filebroker.endpoint_expired", "endpoint-west@w-gw1.yaml"),
        ("filebroker.endpoint_stale_kept", "endpoint-east@e-gw1.yaml"),
        ("filebroker.endpoint_stale_kept", "endpoint-west@w-gw1.yaml"),
        ("filebroker.endpoint_stale_kept", "endpoint-west@w-gw2.yaml"),
        ("filebroker.endpoint_expired", "endpoint-west@w-gw1.yaml"),
        ("filebroker.endpoint_renewed", "endpoint-west@w-gw2.yaml"),
    ]


def test_a_withdrawn_endpoint_is_gone_whatever_the_others(tmp_path: Path) -> None:
    """Keeping is for stale documents only: a cluster's only Endpoint whose file is removed (a withdrawal) leaves
    the snapshot at once."""
    populate(tmp_path)
    now = [endpoint_path(tmp_path, "east", "e-gw1").stat().st_mtime + 1]
    broker = broker_at(tmp_path, now)
    broker.scan()
    os.remove(endpoint_path(tmp_path, "west", "w-gw1"))
    assert broker.scan() is True
    assert hostnames(broker) == ["e-gw1"]


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
