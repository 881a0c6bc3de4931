"""Restarts never flush (docs/globalnet.md; Submariner #721, #1118), on a Globalnet gateway's real kernel state.

A Globalnet broker (the real controller wrote the statuses, the real gateway code the Endpoints) and a route
agent programming gateway gw1 in a namespace. A watcher reads the namespace's ``ip magw`` table and table-100
routes every few milliseconds while, one after the other, the route agent (SIGTERM, then a new one), the
Globalnet controller (a new instance) and the gateway daemon (SIGTERM, then a new one) restart. Every reading
must equal the first: no rule, element or route may be missing, even for one reading. Nothing may change in
the statuses or the Endpoint documents either.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path

import pytest

from magw.daemons.gateway.app import Gateway
from magw.model import Endpoint
from magw.sources.file.broker import FileBroker
from magw.sources.file.endpoint_files import publish_endpoint
from tests.support.daemon_procs import Daemon, agent_args, read_status, wait_for, wire_node
from tests.support.globalnet_broker import controller, converge, gateway, make_broker, put
from tests.support.netns import NsFactory

pytestmark = pytest.mark.kernel


def _broker(d: Path) -> None:
    make_broker(d)
    gateway(d, "gw1", 6)
    gateway(d, "gw2", 7)
    put(d, "tpl", "ClusterGlobalEgressIP", {"name": "cluster-egress.submariner.io", "numberOfIPs": 2})
    put(d, "ns", "Namespace", {"name": "shop"})
    for i in range(20):
        put(d, f"pod{i}", "Pod", {"namespace": "shop", "name": f"p{i}", "ip": f"10.1.9.{i + 2}", "node": "gw2"})
    put(d, "geip", "GlobalEgressIP", {"namespace": "shop", "name": "all", "numberOfIPs": 1})
    put(
        d,
        "svc",
        "Service",
        {"namespace": "shop", "name": "web", "cluster_ip": "100.1.0.10", "ports": [{"port": 80}]},
    )
    put(d, "export", "ServiceExport", {"namespace": "shop", "name": "web"})
    converge(controller(d))
    broker = FileBroker(d, local_cluster="east")
    broker.scan()
    for node in ("gw1", "gw2"):
        Gateway(source=broker, node=node, resync_period=60).ensure("test")
    publish_endpoint(d, _west())


def _west() -> Endpoint:
    return Endpoint(
        cluster="west",
        hostname="w-gw1",
        private_ip=IPv4Address("172.19.0.4"),
        allocated_ips=(IPv4Address("242.2.0.1"), IPv4Address("242.2.0.2")),
    )


def _reading(ns: str) -> str:
    """Our nft table (handles dropped) and our table-100 routes, as one comparable string."""
    nft = subprocess.run(
        ["ip", "netns", "exec", ns, "nft", "-j", "list", "table", "ip", "magw"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    items = json.loads(nft.stdout)["nftables"] if nft.returncode == 0 else []
    body = sorted(
        json.dumps({k: v for k, v in next(iter(i.values())).items() if k != "handle"}, sort_keys=True)
        for i in items
        if "metainfo" not in i
    )
    routes = subprocess.run(
        ["ip", "-n", ns, "-j", "route", "show", "table", "100"], capture_output=True, text=True, timeout=10, check=False
    )
    return json.dumps([body, sorted(json.dumps(r, sort_keys=True) for r in json.loads(routes.stdout or "[]"))])


class Watcher:
    """Reads the namespace's state in a loop (bounded by ``limit`` seconds) and keeps every distinct reading."""

    def __init__(self, ns: str, limit: float = 120.0) -> None:
        self.ns, self.limit = ns, limit
        self.readings: list[str] = []
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        end = time.monotonic() + self.limit
        while not self._stop.is_set() and time.monotonic() < end:
            reading = _reading(self.ns)
            self.count += 1
            if not self.readings or self.readings[-1] != reading:
                self.readings.append(reading)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _files(d: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(d.iterdir()) if p.is_file() and not p.name.startswith(".")}


def test_restarting_agent_controller_and_gateway_removes_nothing(
    tmp_path: Path,
    ns_factory: NsFactory,
    daemons: Callable[..., Daemon],
) -> None:
    d = tmp_path / "broker"
    _broker(d)
    ns, peer = ns_factory("magwt-gr"), ns_factory("magwt-grp")
    wire_node(ns, peer, ip="172.18.0.6", cni_ip="10.1.6.1")
    status = tmp_path / "status.json"
    args = (*agent_args(d, node="gw1"), "--no-health", "--status-file", str(status))
    agent = daemons("route_agent", *args, netns=ns)
    wait_for(lambda: (read_status(status) or {}).get("converged") is True, "first agent converged")
    first = _reading(ns)
    assert "gn_egress" in first and "242.2.0.1" in first, "the Globalnet table and return routes are in place"
    files = _files(d)
    gw = daemons("gateway", "--broker-dir", str(d), "--node", "gw1", "--cluster", "east", "--log-format", "json")
    wait_for(lambda: gw.saw("gateway.started"), "gateway daemon started")
    with Watcher(ns) as watcher:
        agent.signal(signal.SIGTERM)
        assert agent.wait() == 0
        status.unlink()
        agent = daemons("route_agent", *args, netns=ns)
        wait_for(lambda: (read_status(status) or {}).get("converged") is True, "restarted agent converged")
        converge(controller(d))  # a new controller instance: re-reserves, writes nothing new
        gw.signal(signal.SIGTERM)
        assert gw.wait() == 0
        gw = daemons("gateway", "--broker-dir", str(d), "--node", "gw1", "--cluster", "east", "--log-format", "json")
        wait_for(lambda: gw.saw("filebroker.initial_sync"), "restarted gateway read the broker")
        time.sleep(1.0)  # let the agent see whatever the restarts may have changed
    assert watcher.count > 20, "the watcher must have read the state many times during the restarts"
    assert watcher.readings == [first], "some reading during the restarts differed from the state before"
    assert _files(d) == files, "a restart changed a status or an Endpoint document"
    (sync,) = [e for e in _events(agent) if e["event"] == "reconciler.sync_done"][:1]
    assert sync["changes"] == 0, "the restarted agent found nothing to change"


def _events(daemon: Daemon) -> list[dict[str, object]]:
    return [json.loads(line) for line in daemon.stderr.splitlines() if line.startswith("{")]
