"""A file broker directory of clusters east and west, written as a careful writer does, and the snapshot east
should see in it: shared by the file broker's tests."""

from __future__ import annotations

import os
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

from magw.model import Cluster, Config, Endpoint, Node, Snapshot, Strategy
from magw.sources import publish_endpoint
from tests.support.broker_docs import broker_document

A = IPv4Address
N = IPv4Network

CLUSTERS = broker_document("clusters-east-west.yaml")

NODES = {
    "node-e-gw1.yaml": "{kind: Node, cluster: east, name: e-gw1, ip: 172.18.0.6, cni_ip: 10.1.1.1, gateway: true}\n",
    "node-e-w1.yaml": "{kind: Node, cluster: east, name: e-w1, ip: 172.18.0.3, cni_ip: 10.1.3.1}\n",
    "node-w-gw1.yaml": "{kind: Node, cluster: west, name: w-gw1, ip: 172.19.0.4, cni_ip: 10.2.1.1, gateway: true}\n",
}

E_GW1 = Endpoint(cluster="east", hostname="e-gw1", private_ip=A("172.18.0.6"), public_ip=A("198.18.0.6"))
W_GW1 = Endpoint(cluster="west", hostname="w-gw1", private_ip=A("172.19.0.4"))


def write(directory: Path, name: str, text: str) -> None:
    """Write a file the way a careful writer does (temp + rename), so the broker never sees half of it."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text(text)
    os.rename(tmp, directory / name)


def populate(directory: Path, *, config: str = "kind: Config\nstrategy: group\nunderlay_mtu: 1400\n") -> None:
    """Clusters east and west, ``config``, nodes e-gw1, e-w1 (east) and w-gw1 (west), gateways e-gw1 and w-gw1."""
    write(directory, "clusters.yaml", CLUSTERS)
    write(directory, "config.yaml", config)
    for name, text in NODES.items():
        write(directory, name, text)
    publish_endpoint(directory, E_GW1)
    publish_endpoint(directory, W_GW1)


def expected_snapshot(*endpoints: Endpoint) -> Snapshot:
    """East's snapshot of a ``populate``d directory (its default config) with these endpoints."""
    return Snapshot(
        local_cluster="east",
        clusters=[
            Cluster(id="east", pod_cidrs=[N("10.1.0.0/16")], service_cidrs=[N("100.1.0.0/16")]),
            Cluster(id="west", pod_cidrs=[N("10.2.0.0/16")], service_cidrs=[N("100.2.0.0/16")]),
        ],
        nodes=[
            Node(name="e-gw1", ip=A("172.18.0.6"), cni_ip=A("10.1.1.1"), gateway=True),
            Node(name="e-w1", ip=A("172.18.0.3"), cni_ip=A("10.1.3.1")),
        ],
        endpoints=endpoints,
        config=Config(strategy=Strategy.GROUP, underlay_mtu=1400),
    )
