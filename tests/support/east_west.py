"""A two-cluster snapshot for kernel tests of one node's planned ``ip magw`` table, and applying that table.

East (pods 10.1.0.0/16, Services 100.1.0.0/16) with a gateway and a worker; west is 10.2.0.0/16 with one gateway.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from magw.desired.nft.values import NftTable
from magw.desired.node.planner import plan
from magw.drivers.nft import NftDriver
from magw.model import Cluster, Endpoint, Node, Snapshot
from magw.reconcile.changeset import NftChange


def east_west_snapshot(gateway: str, gateway_cni_ip: str, worker: str, worker_cni_ip: str) -> Snapshot:
    net = IPv4Network
    return Snapshot(
        local_cluster="east",
        clusters=(
            Cluster(id="east", pod_cidrs=(net("10.1.0.0/16"),), service_cidrs=(net("100.1.0.0/16"),)),
            Cluster(id="west", pod_cidrs=(net("10.2.0.0/16"),), service_cidrs=(net("100.2.0.0/16"),)),
        ),
        nodes=(
            Node(name=gateway, ip=IPv4Address("172.18.0.6"), cni_ip=IPv4Address(gateway_cni_ip), gateway=True),
            Node(name=worker, ip=IPv4Address("172.18.0.3"), cni_ip=IPv4Address(worker_cni_ip)),
        ),
        endpoints=(
            Endpoint(cluster="east", hostname=gateway, private_ip=IPv4Address("172.18.0.6")),
            Endpoint(cluster="west", hostname="w-gw1", private_ip=IPv4Address("172.19.0.4")),
        ),
    )


def apply_planned_table(ns: str, snapshot: Snapshot, node: str) -> NftTable:
    """``node``'s planned ``ip magw`` table, applied in namespace ``ns`` by our driver (one transaction)."""
    table = plan(snapshot, node).nft
    assert table is not None
    with NftDriver(ns) as driver:
        assert driver.apply([NftChange(family="ip", name="magw", table=table)]).failed == ()
    return table
