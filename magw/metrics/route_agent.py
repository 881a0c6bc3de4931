"""The route agent's metrics (docs/metrics.md): its connections under Submariner's names, and its probes,
failovers, nexthop group changes and carried flows under magw's.

Read at scrape time, in the scrape's thread, from what the agent already holds: the source's snapshot (the
gateways), the health monitor's status (each probed gateway's state, RTT and since: the status file's
``health``), the WireGuard cable's last transfer counters, how many clusters its last plan kept by fail static.
Counted as they happen: each answered alive probe's RTT and each transition to down (listeners of the monitor).
Nothing here runs per packet.

Connections are what an active gateway probes: one per remote gateway. A worker probes its own cluster's gateways
(``magw_path_up`` and the RTT histogram cover those too) but has no connection of Submariner's kind.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from ipaddress import IPv4Network
from typing import Any

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from magw.health.events import Transition
from magw.health.monitor import HealthMonitor
from magw.health.targets import ProbeTarget
from magw.metrics.families import counter, gauge_family, histogram
from magw.model import Endpoint, Snapshot
from magw.util.conntrack import parse_conntrack

log = structlog.get_logger(__name__)

RTT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5)
DETECTION_BUCKETS = (0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)
_STATUS = {"up": "connected", "down": "error"}  # anything else (pending, unknown): connecting
CONNTRACK_TIMEOUT = 5.0

Transfers = Callable[[], Mapping[str, tuple[int, int]]]  # WireGuard peer public key -> (rx bytes, tx bytes)


def _endpoint_ip(e: Endpoint) -> str:
    return str(e.public_ip or e.private_ip)


class _Scraped(Collector):
    """The gauges read at scrape time."""

    def __init__(self, node: str, snapshot: Callable[[], Snapshot | None], health: HealthMonitor | None,
                 transfers: Transfers, conntrack: Callable[[], str | None],
                 fail_static: Callable[[], int]) -> None:  # fmt: skip
        self.node = node
        self._fail_static = fail_static
        self._snapshot = snapshot
        self._health = health
        self._transfers = transfers
        self._conntrack = conntrack

    def describe(self) -> list[Any]:
        return []  # collected on scrape only: registering must not read anything

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self._snapshot()
        gateways, conns, latency, established, rx, tx, up, flows = (
            gauge_family(name)
            for name in ("submariner_gateways", "submariner_connections", "submariner_connection_latency_seconds",
                         "submariner_connection_established_timestamp", "submariner_gateway_rx_bytes",
                         "submariner_gateway_tx_bytes", "magw_path_up", "magw_gateway_flows")
        )  # fmt: skip
        kept = gauge_family("magw_fail_static_clusters")
        if snap is not None:
            self._fill(snap, gateways, conns, latency, established, rx, tx, up, flows)
            kept.add_metric([], float(self._fail_static()))
        yield from (gateways, conns, latency, established, rx, tx, up, flows, kept)

    def _peers(self) -> list[dict[str, Any]]:
        if self._health is None:
            return []
        for _ in range(3):  # the monitor runs in the event loop's thread: a plan change mid-read is read again
            try:
                return list(self._health.status_json().get("peers", []))
            except RuntimeError:
                continue
        return []

    def _fill(self, snap: Snapshot, gateways: GaugeMetricFamily, conns: GaugeMetricFamily,
              latency: GaugeMetricFamily, established: GaugeMetricFamily, rx: GaugeMetricFamily,
              tx: GaugeMetricFamily, up: GaugeMetricFamily, flows: GaugeMetricFamily) -> None:  # fmt: skip
        local = snap.local_cluster
        gateways.add_metric([local], sum(1 for e in snap.endpoints if e.cluster == local))
        mine = next((e for e in snap.endpoints if e.cluster == local and e.hostname == self.node), None)
        remote = {(e.cluster, e.hostname): e for e in snap.endpoints if e.cluster != local}
        transfers = self._transfers() if mine is not None else {}
        cable = snap.config.cable.value
        for peer in self._peers():
            state = str(peer.get("state"))
            if state in ("up", "down"):
                up.add_metric([peer["hostname"], peer["cluster"]], 1.0 if state == "up" else 0.0)
            endpoint = remote.get((peer["cluster"], peer["hostname"]))
            if mine is None or endpoint is None:
                continue  # a worker's local gateway, or a gateway no longer published
            labels = [cable, local, self.node, _endpoint_ip(mine), endpoint.cluster, endpoint.hostname,
                      _endpoint_ip(endpoint)]  # fmt: skip
            conns.add_metric([*labels, _STATUS.get(state, "connecting")], 1.0)
            rtt = peer.get("rtt") or {}
            if "last" in rtt:
                latency.add_metric(labels, float(rtt["last"]))
            if state == "up" and peer.get("since"):
                established.add_metric(labels, datetime.fromisoformat(peer["since"]).timestamp())
            counters = transfers.get(endpoint.public_key or "")
            if counters is not None:
                rx.add_metric(labels, float(counters[0]))
                tx.add_metric(labels, float(counters[1]))
        if mine is not None:
            self._flows(snap, flows)

    def _flows(self, snap: Snapshot, flows: GaugeMetricFamily) -> None:
        text = self._conntrack()
        if text is None:
            return
        nets: dict[str, tuple[IPv4Network, ...]] = {c.id: c.cidrs for c in snap.remote_clusters}
        counted = dict.fromkeys(nets, 0)
        for entry in parse_conntrack(text):
            ends = (entry.original.src, entry.original.dst, entry.reply.src, entry.reply.dst)
            for cluster, cidrs in nets.items():
                if any(a in net for a in ends for net in cidrs):
                    counted[cluster] += 1
                    break
        for cluster, n in sorted(counted.items()):
            flows.add_metric([cluster], float(n))


def read_conntrack() -> str | None:
    """``conntrack -L`` of the namespace the daemon runs in (at each scrape, bounded by CONNTRACK_TIMEOUT); None
    when it cannot be read (logged)."""
    try:
        done = subprocess.run(["conntrack", "-L"], capture_output=True, text=True, timeout=CONNTRACK_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("metrics.conntrack_unreadable", error=str(exc))
        return None
    return done.stdout if done.returncode == 0 else None


class RouteAgentMetrics:
    """Registers the route agent's metrics in ``registry`` and listens to ``health``. ``fail_static``: how many
    remote clusters the last plan kept by fail static (read at scrape time)."""

    def __init__(self, registry: CollectorRegistry | None, *, node: str, snapshot: Callable[[], Snapshot | None],
                 health: HealthMonitor | None, transfers: Transfers = dict,
                 conntrack: Callable[[], str | None] = read_conntrack,
                 fail_static: Callable[[], int] = lambda: 0) -> None:  # fmt: skip
        self.rtt = histogram("magw_probe_rtt_seconds", registry, RTT_BUCKETS)
        self.failovers = counter("magw_failovers_total", registry)
        self.detection = histogram("magw_failover_detection_seconds", registry, DETECTION_BUCKETS)
        if registry is not None:
            registry.register(_Scraped(node, snapshot, health, transfers, conntrack, fail_static))
        if health is not None:
            health.on_answer = self.answered
            health.events.listeners.append(self.transition)

    def answered(self, target: ProbeTarget, rtt: float) -> None:
        self.rtt.labels(peer=target.hostname, peer_cluster=target.cluster).observe(rtt)

    def transition(self, event: Transition) -> None:
        if event.new != "down":
            return
        self.failovers.labels(peer=event.peer, peer_cluster=event.cluster, what=event.what).inc()
        if event.detection is not None:
            self.detection.labels(peer_cluster=event.cluster).observe(event.detection)
