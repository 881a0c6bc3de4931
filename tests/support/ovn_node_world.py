"""An OVN-Kubernetes cluster east as the node side of ``cni: ovn`` sees it (docs/ovn-node.md): its nodes with
OVN-K's addresses, its gateways' and west's Endpoints, with or without Globalnet."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from magw.model import Cluster, Cni, Config, Endpoint, Node, Snapshot

N = IPv4Network
A = IPv4Address

# OVN-Kubernetes' layout: a node's subnet of the pod CIDR, ovn-k8s-mp0 on its second address (the cni_ip),
# the node's router port on the first.
NODES = (
    Node(name="e-gw1", ip=A("172.18.0.6"), cni_ip=A("10.1.1.2"), gateway=True),
    Node(name="e-gw2", ip=A("172.18.0.8"), cni_ip=A("10.1.2.2"), gateway=True),
    Node(name="e-w1", ip=A("172.18.0.3"), cni_ip=A("10.1.3.2")),
)
ENDPOINTS = (
    Endpoint(cluster="east", hostname="e-gw1", private_ip=A("172.18.0.6")),
    Endpoint(cluster="east", hostname="e-gw2", private_ip=A("172.18.0.8")),
    Endpoint(cluster="west", hostname="w-gw1", private_ip=A("172.19.0.4")),
)


def snapshot(*, cni: Cni = Cni.OVN, globalnet: bool = False) -> Snapshot:
    """East (three nodes, two gateways) and west; with ``globalnet`` both have global CIDRs and share CIDRs."""
    east = Cluster(
        id="east",
        pod_cidrs=[N("10.1.0.0/16")],
        service_cidrs=[N("100.1.0.0/16")],
        global_cidrs=[N("242.1.0.0/24")] if globalnet else [],
    )
    west = Cluster(
        id="west",
        # With Globalnet, clusters may share pod and service CIDRs: west uses east's.
        pod_cidrs=[N("10.1.0.0/16") if globalnet else N("10.2.0.0/16")],
        service_cidrs=[N("100.1.0.0/16") if globalnet else N("100.2.0.0/16")],
        global_cidrs=[N("242.2.0.0/24")] if globalnet else [],
    )
    return Snapshot(
        local_cluster="east", clusters=(east, west), nodes=NODES, endpoints=ENDPOINTS, config=Config(cni=cni)
    )
