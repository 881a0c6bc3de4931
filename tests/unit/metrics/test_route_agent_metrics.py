"""The route agent's metrics read at scrape time and counted as they happen (magw.metrics.route_agent): a gateway
with two remote gateways, one up and one down, over WireGuard; a worker, which has paths but no connections."""

from __future__ import annotations

from datetime import datetime
from ipaddress import IPv4Address, IPv4Network
from typing import Any, cast

from prometheus_client import CollectorRegistry
from pytest import approx

from magw.health.events import TransitionLog
from magw.health.monitor import HealthMonitor
from magw.health.targets import ProbeTarget
from magw.metrics.route_agent import RouteAgentMetrics
from magw.model import Cluster, Config, Endpoint, Node, Snapshot
from magw.model.cable import Cable

UP_SINCE = "2026-11-29T01:00:00.000+00:00"
PEERS: list[dict[str, Any]] = [
    {"hostname": "west-gw1", "cluster": "west", "address": "241.19.0.4", "state": "up",
     "rtt": {"last": 0.0012, "min": 0.001, "average": 0.0011, "max": 0.002, "stdDev": 0.0001}, "since": UP_SINCE},
    {"hostname": "west-gw2", "cluster": "west", "address": "241.19.0.9", "state": "down",
     "rtt": {"last": 0.0009, "min": 0.0009, "average": 0.0009, "max": 0.0009, "stdDev": 0.0}},
    {"hostname": "west-gw3", "cluster": "west", "address": "241.19.0.12", "state": "pending"},
]  # fmt: skip
CONNTRACK = """\
udp      17 29 src=10.1.3.2 dst=10.2.3.2 sport=40000 dport=7 src=10.2.3.2 dst=10.1.3.2 sport=7 dport=40000 mark=0 use=1
tcp      6 431999 ESTABLISHED src=10.2.2.2 dst=10.1.1.2 sport=5555 dport=80 src=10.1.1.2 dst=10.2.2.2 sport=80 \
dport=5555 [ASSURED] mark=0 use=1
udp      17 29 src=10.1.3.2 dst=10.1.4.2 sport=40001 dport=7 src=10.1.4.2 dst=10.1.3.2 sport=7 dport=40001 mark=0 use=1
"""


class FakeHealth:
    """What the metrics use of a HealthMonitor: its status, its transition log and its answer hook."""

    def __init__(self, peers: list[dict[str, Any]]) -> None:
        self.peers = peers
        self.events = TransitionLog()
        self.on_answer: Any = None

    def status_json(self) -> dict[str, Any]:
        return {"mode": "gateway", "peers": self.peers}


def _snapshot() -> Snapshot:
    east = Cluster(id="east", pod_cidrs=[IPv4Network("10.1.0.0/16")], service_cidrs=[IPv4Network("100.1.0.0/16")])
    west = Cluster(id="west", pod_cidrs=[IPv4Network("10.2.0.0/16")], service_cidrs=[IPv4Network("100.2.0.0/16")])
    endpoints = [
        Endpoint(cluster="east", hostname="east-gw1", private_ip=IPv4Address("172.17.0.11"),
                 public_ip=IPv4Address("192.0.2.11")),
        Endpoint(cluster="east", hostname="east-gw2", private_ip=IPv4Address("172.17.0.12")),
        Endpoint(cluster="west", hostname="west-gw1", private_ip=IPv4Address("172.18.0.11"),
                 public_ip=IPv4Address("192.0.2.21"), public_key="a" * 43 + "="),
        Endpoint(cluster="west", hostname="west-gw2", private_ip=IPv4Address("172.18.0.12"), public_key="b" * 43 + "="),
    ]  # fmt: skip
    nodes = [Node(name=n, ip=IPv4Address(ip), cni_ip=IPv4Address(ip)) for n, ip in
             (("east-gw1", "172.17.0.11"), ("east-w1", "172.17.0.101"))]  # fmt: skip
    return Snapshot(local_cluster="east", clusters=[east, west], nodes=nodes, endpoints=endpoints,
                    config=Config(cable=Cable.WIREGUARD))  # fmt: skip


def _metrics(node: str, health: FakeHealth, registry: CollectorRegistry) -> RouteAgentMetrics:
    snap = _snapshot()
    return RouteAgentMetrics(registry, node=node, snapshot=lambda: snap, health=cast(HealthMonitor, health),
                             transfers=lambda: {"a" * 43 + "=": (1000, 2000)}, conntrack=lambda: CONNTRACK)  # fmt: skip


def _conn(remote: str, remote_ip: str) -> dict[str, str]:
    return {"cable_driver": "wireguard", "local_cluster": "east", "local_hostname": "east-gw1",
            "local_endpoint_ip": "192.0.2.11", "remote_cluster": "west", "remote_hostname": remote,
            "remote_endpoint_ip": remote_ip}  # fmt: skip


def test_a_gateway_exports_its_connections_under_submariners_names() -> None:
    registry = CollectorRegistry()
    _metrics("east-gw1", FakeHealth(PEERS), registry)
    value = registry.get_sample_value
    assert value("submariner_gateways", {"local_cluster": "east"}) == 2
    gw1, gw2 = _conn("west-gw1", "192.0.2.21"), _conn("west-gw2", "172.18.0.12")  # public IP, else the private
    assert value("submariner_connections", {**gw1, "status": "connected"}) == 1
    assert value("submariner_connections", {**gw2, "status": "error"}) == 1
    assert value("submariner_connections", {**gw1, "status": "error"}) is None
    assert value("submariner_connection_latency_seconds", gw1) == 0.0012
    assert value("submariner_connection_latency_seconds", gw2) == 0.0009
    assert value("submariner_connection_established_timestamp", gw1) == datetime.fromisoformat(UP_SINCE).timestamp()
    assert value("submariner_connection_established_timestamp", gw2) is None  # not connected
    assert (value("submariner_gateway_rx_bytes", gw1), value("submariner_gateway_tx_bytes", gw1)) == (1000, 2000)
    assert value("submariner_gateway_rx_bytes", gw2) is None  # the cable has no counters for it
    # west-gw3 is probed but not published (any more): a path, no connection
    assert value("magw_path_up", {"peer": "west-gw1", "peer_cluster": "west"}) == 1
    assert value("magw_path_up", {"peer": "west-gw2", "peer_cluster": "west"}) == 0
    assert value("magw_path_up", {"peer": "west-gw3", "peer_cluster": "west"}) is None  # pending: not decided
    # two tracked connections have an end in west (one each way), the third stays in east
    assert value("magw_gateway_flows", {"remote_cluster": "west"}) == 2


def test_a_worker_has_paths_but_no_connections_and_reads_no_conntrack() -> None:
    registry = CollectorRegistry()
    local = [{"hostname": "east-gw1", "cluster": "east", "address": "240.17.0.11", "state": "up"}]
    read: list[int] = []

    def conntrack() -> str:
        read.append(1)
        return CONNTRACK

    snap = _snapshot()
    RouteAgentMetrics(registry, node="east-w1", snapshot=lambda: snap, health=cast(HealthMonitor, FakeHealth(local)),
                      conntrack=conntrack)  # fmt: skip
    assert registry.get_sample_value("magw_path_up", {"peer": "east-gw1", "peer_cluster": "east"}) == 1
    names = {s.name for m in registry.collect() for s in m.samples}
    assert "submariner_connections" not in names and "magw_gateway_flows" not in names
    assert read == []


def test_probes_and_failovers_are_counted_as_they_happen() -> None:
    registry = CollectorRegistry()
    health = FakeHealth(PEERS)
    _metrics("east-gw1", health, registry)
    target = ProbeTarget(hostname="west-gw1", cluster="west", address=IPv4Address("241.19.0.4"), echo_ids=(1,))
    for rtt in (0.0003, 0.0004, 0.02):
        health.on_answer(target, rtt)
    peer = {"peer": "west-gw1", "peer_cluster": "west"}
    assert registry.get_sample_value("magw_probe_rtt_seconds_count", peer) == 3
    assert registry.get_sample_value("magw_probe_rtt_seconds_bucket", {**peer, "le": "0.0005"}) == 2
    key = (IPv4Address("241.19.0.4"), 1)
    health.events.answered(key, 10.0)
    fields = {"peer": "west-gw1", "cluster": "west", "address": "241.19.0.4", "what": "alive"}
    health.events.changed(key, 10.12, old="up", new="down", **fields)
    health.events.changed(key, 11.0, old="down", new="up", **fields)  # a recovery is not a failover
    assert registry.get_sample_value("magw_failovers_total", {**peer, "what": "alive"}) == 1
    assert registry.get_sample_value("magw_failover_detection_seconds_count", {"peer_cluster": "west"}) == 1
    assert registry.get_sample_value("magw_failover_detection_seconds_sum", {"peer_cluster": "west"}) == approx(0.12)


def test_before_the_first_snapshot_nothing_is_made_up() -> None:
    registry = CollectorRegistry()
    RouteAgentMetrics(registry, node="east-gw1", snapshot=lambda: None, health=None)
    assert [s for m in registry.collect() for s in m.samples if not s.name.startswith("magw_probe")] == []
