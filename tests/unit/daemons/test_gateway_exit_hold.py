"""A gateway's clean stop keeps its Endpoint in the route agents' snapshots while it restarts (``--exit-hold``).

Found by the lab's rolling upgrade (tests/lab/test_lab_upgrade.py): on the loaded 2-core machine a gateway's
restart took 4-6 s from its last heartbeat to the next one, the route agents' ``--endpoint-ttl`` (5 s) expired
its Endpoint, and every flow through it moved (the Globalnet TCP connections were reset). The route agents' view
is a plain ``FileBroker`` with their TTL, whose wall clock the test sets: no sleeping, no timing.
"""

from __future__ import annotations

import asyncio
import os
import time
from ipaddress import IPv4Address
from pathlib import Path

from magw.daemons.gateway.app import DEFAULT_EXIT_HOLD, Gateway
from magw.model import Endpoint
from magw.sources.file.broker import FileBroker
from magw.sources.file.endpoint_files import endpoint_path, publish_endpoint
from tests.support.globalnet_broker import gateway, make_broker

TTL = 5.0  # the route agents' default --endpoint-ttl


def run_and_stop(d: Path, **kw: float) -> float:
    """Start a gateway for node gw1, let it publish, SIGTERM-like stop; returns the wall time of the stop."""
    broker = FileBroker(d, local_cluster="east")

    async def main() -> float:
        gw = Gateway(source=broker, node="gw1", resync_period=60, **kw)  # type: ignore[arg-type]
        stop = asyncio.Event()
        task = asyncio.create_task(gw.serve(stop))
        for _ in range(200):  # bounded: 10 s
            if endpoint_path(d, "east", "gw1").exists():
                break
            await asyncio.sleep(0.05)
        stopped = time.time()
        stop.set()
        assert await task == 0
        return stopped

    return asyncio.run(main())


def with_fellow(d: Path) -> Path:
    """A second gateway, gw2, whose Endpoint ``seen_by_route_agents`` finds fresh: without a fresh Endpoint in
    the cluster, a stale one is kept (fail static, magw.sources.file.expiry), and these tests are about expiry."""
    gateway(d, "gw2", 7)
    publish_endpoint(d, Endpoint(cluster="east", hostname="gw2", private_ip=IPv4Address("172.18.0.7")))
    return d


def seen_by_route_agents(d: Path, at: float) -> bool:
    """Whether a route agent's broker (TTL 5 s) at wall time ``at`` still has gw1's Endpoint (gw2's, if there,
    has just been touched)."""
    fellow = endpoint_path(d, "east", "gw2")
    if fellow.exists():
        os.utime(fellow, (at, at))
    view = FileBroker(d, local_cluster="east", endpoint_ttl=TTL, wall_clock=lambda: at)
    view.scan()
    assert view.snapshot is not None
    return any(e.hostname == "gw1" for e in view.snapshot.endpoints_of("east"))


def test_a_clean_stop_holds_the_endpoint_over_a_restart_longer_than_the_ttl(tmp_path: Path) -> None:
    d = with_fellow(make_broker(tmp_path))
    gateway(d, "gw1", 6)
    stopped = run_and_stop(d)
    restart = stopped + TTL + 3  # the next gateway's first heartbeat comes later than the TTL
    assert seen_by_route_agents(d, restart), "the route agents dropped the Endpoint during the restart"
    gone = stopped + DEFAULT_EXIT_HOLD + TTL + 2  # a gateway that stays away is dropped after hold + TTL
    assert not seen_by_route_agents(d, gone)


def test_without_the_hold_the_endpoint_expired_during_such_a_restart(tmp_path: Path) -> None:
    """The behaviour before ``--exit-hold`` (``--exit-hold 0``): the document ages from its last heartbeat."""
    d = with_fellow(make_broker(tmp_path))
    gateway(d, "gw1", 6)
    stopped = run_and_stop(d, exit_hold=0.0)
    assert os.stat(endpoint_path(d, "east", "gw1")).st_mtime <= stopped
    assert not seen_by_route_agents(d, stopped + TTL + 3)


def test_the_clusters_only_gateway_is_kept_past_the_ttl(tmp_path: Path) -> None:
    """Fail static: without another fresh Endpoint in east, gw1's stale one stays in the route agents' view, also
    long after a stop without the hold (a SIGKILL ages it the same way)."""
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    stopped = run_and_stop(d, exit_hold=0.0)
    assert seen_by_route_agents(d, stopped + TTL + 3)
    assert seen_by_route_agents(d, stopped + DEFAULT_EXIT_HOLD + TTL + 60)


def test_a_withdrawing_stop_removes_the_document(tmp_path: Path) -> None:
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    stopped = run_and_stop(d, withdraw_on_exit=True)  # type: ignore[arg-type]
    assert not endpoint_path(d, "east", "gw1").exists()
    assert not seen_by_route_agents(d, stopped)
