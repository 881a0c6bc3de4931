"""The seed's example clusterset (east/west, two gateways each), as used by the golden tests.

``examples/seed-east.yaml`` is the same scenario in the snapshot file format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.model import Cluster, Config, Endpoint, Health, Node, Snapshot, Strategy

EAST = Cluster(id="east", pod_cidrs=[IPv4Network("10.1.0.0/16")], service_cidrs=[IPv4Network("100.1.0.0/16")])
WEST = Cluster(id="west", pod_cidrs=[IPv4Network("10.2.0.0/16")], service_cidrs=[IPv4Network("100.2.0.0/16")])

NODES = (
    Node(name="e-gw1", ip=IPv4Address("172.18.0.6"), cni_ip=IPv4Address("10.1.1.1"), gateway=True),
    Node(name="e-gw2", ip=IPv4Address("172.18.0.8"), cni_ip=IPv4Address("10.1.2.1"), gateway=True),
    Node(name="e-w1", ip=IPv4Address("172.18.0.3"), cni_ip=IPv4Address("10.1.3.1")),
)

ENDPOINTS = (
    Endpoint(
        cluster="east",
        hostname="e-gw1",
        private_ip=IPv4Address("172.18.0.6"),
        public_ip=IPv4Address("198.51.100.6"),
    ),
    Endpoint(
        cluster="east",
        hostname="e-gw2",
        private_ip=IPv4Address("172.18.0.8"),
        public_ip=IPv4Address("198.51.100.8"),
    ),
    Endpoint(
        cluster="west",
        hostname="w-gw1",
        private_ip=IPv4Address("172.18.0.4"),
        public_ip=IPv4Address("198.51.100.4"),
    ),
    Endpoint(
        cluster="west",
        hostname="w-gw2",
        private_ip=IPv4Address("172.18.0.9"),
        public_ip=IPv4Address("198.51.100.9"),
    ),
)


def seed_east(
    strategy: Strategy = Strategy.RESILIENT, *, multi_active: bool = True, health: Health | None = None
) -> Snapshot:
    """The seed scenario seen from east."""
    return Snapshot(
        local_cluster="east",
        clusters=(EAST, WEST),
        nodes=NODES,
        endpoints=ENDPOINTS,
        config=Config(strategy=strategy, multi_active=multi_active, underlay_mtu=1500),
        health=health or Health(),
    )


def with_health(
    snapshot: Snapshot, *, down: Iterable[str] = (), reach: Mapping[str, Iterable[str]] | None = None
) -> Snapshot:
    """``snapshot`` with its health replaced."""
    return attrs.evolve(snapshot, health=Health(down=frozenset(down), reach=reach or {}))
