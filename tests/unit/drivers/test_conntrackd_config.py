"""conntrackd.conf's address filter (magw.drivers.conntrackd.config), and the inter-cluster networks the egress
agent gives it (magw.daemons.egressgw_agent.node.inter_cluster). conntrackd itself reads the result in
tests/kernel/test_egress_nat_sync.py."""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv4Network

from magw.daemons.egressgw_agent.node import inter_cluster
from magw.drivers.conntrackd.config import ConntrackdNode, render
from magw.model import Cluster, Node, Snapshot

NODE = ConntrackdNode(interface="eth0", ip=IPv4Address("172.17.0.11"), peers=(IPv4Address("172.17.0.12"),),
                      socket="/run/x/ctd.sock", lock_file="/run/x/ctd.lock", log_file="/run/x/ctd.log")  # fmt: skip


def _ignored(text: str) -> list[str]:
    block = text.split("Address Ignore {")[1].split("}")[0]
    return re.findall(r"IPv4_address (\S+)", block)


def test_addresses_and_networks_are_ignored_sorted_and_once() -> None:
    text = render(NODE, ignore=[IPv4Address("172.17.0.200"), IPv4Network("242.2.0.0/16"), IPv4Network("10.2.0.0/16"),
                                IPv4Network("172.17.0.12/32"), IPv4Network("242.2.0.0/16")])  # fmt: skip
    # a host is written as an address; the peer given twice (as a peer and as a /32) once
    assert _ignored(text) == ["10.2.0.0/16", "127.0.0.1", "172.17.0.11", "172.17.0.12", "172.17.0.200",
                              "242.2.0.0/16"]  # fmt: skip


def _snapshot(local: Cluster, *remote: Cluster) -> Snapshot:
    nodes = [Node(name="n1", ip=IPv4Address("172.17.0.11"), cni_ip=IPv4Address("10.1.0.1"))]
    return Snapshot(local_cluster=local.id, clusters=[local, *remote], nodes=nodes, endpoints=[])


def _cluster(cid: str, pods: str, services: str, *global_cidrs: str) -> Cluster:
    return Cluster(id=cid, pod_cidrs=[IPv4Network(pods)], service_cidrs=[IPv4Network(services)],
                   global_cidrs=[IPv4Network(g) for g in global_cidrs])  # fmt: skip


def test_without_globalnet_the_remote_pod_and_service_cidrs() -> None:
    snap = _snapshot(_cluster("east", "10.1.0.0/16", "100.1.0.0/16"), _cluster("west", "10.2.0.0/16", "100.2.0.0/16"))
    assert inter_cluster(snap) == [IPv4Network("10.2.0.0/16"), IPv4Network("100.2.0.0/16")]


def test_with_globalnet_only_the_remote_global_cidrs_as_the_others_overlap_ours() -> None:
    """Overlapping clusters (the soak's): ignoring 10.0.0.0/16 would also stop the sync of the local pods' egress
    flows, the ones conntrackd is there for."""
    east = _cluster("east", "10.0.0.0/16", "100.0.0.0/16", "242.1.0.0/16")
    west = _cluster("west", "10.0.0.0/16", "100.0.0.0/16", "242.2.0.0/16")
    north = _cluster("north", "10.0.0.0/16", "100.0.0.0/16", "242.3.0.0/16")
    assert inter_cluster(_snapshot(east, west, north)) == [IPv4Network("242.2.0.0/16"), IPv4Network("242.3.0.0/16")]
