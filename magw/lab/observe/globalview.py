"""What the Globalnet controllers of a lab allocated, read from the broker directory (the controllers' statuses).

One read per cluster, through ``magw.sources.file.broker.FileBroker`` with that cluster as the local one (the
snapshot's ``globalnet`` holds only the local cluster's objects and statuses), so the lab sees exactly what
the route agents and gateways see. Used by ``up``'s readiness wait, by the inter-cluster probes (a cluster's
pods cannot be reached by their overlapping pod IPs, only by global IPs) and by ``magw lab status``.
"""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import IPv4Address
from pathlib import Path

import attrs

from magw.ipam.globalnet import gateway_egress_name
from magw.model.globalnet import (
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    SERVICE,
    GlobalIngressIP,
    GlobalIPStatus,
    Globalnet,
    ObjectRef,
    TargetType,
)
from magw.sources.file.broker import FileBroker

Key = tuple[str, str]  # (Kubernetes namespace, name)
Addresses = tuple[IPv4Address, ...]


@attrs.frozen(kw_only=True)
class IngressAddress:
    """A GlobalIngressIP with its allocated address: the global IP of an exported service or headless backend."""

    namespace: str
    name: str
    service: str
    target: TargetType
    target_ip: IPv4Address | None
    global_ip: IPv4Address


@attrs.frozen(kw_only=True)
class ClusterView:
    """One cluster's allocations. Absent keys: nothing allocated (yet)."""

    cluster: str
    ingress: tuple[IngressAddress, ...] = ()
    gateway_egress: Mapping[str, Addresses] = attrs.field(factory=dict)  # gateway node -> cluster egress IPs
    egress_objects: Mapping[Key, Mapping[str, Addresses]] = attrs.field(factory=dict)  # GlobalEgressIP -> node

    def service_ip(self, namespace: str, name: str) -> IPv4Address | None:
        """The global IP of exported ClusterIP service ``namespace/name``."""
        for i in self.ingress:
            if (i.namespace, i.service, i.target) == (namespace, name, TargetType.CLUSTER_IP_SERVICE):
                return i.global_ip
        return None

    def backend_ips(self, namespace: str, name: str) -> dict[IPv4Address, IPv4Address]:
        """Backend IP -> global IP for the backends of exported headless service ``namespace/name``."""
        return {
            i.target_ip: i.global_ip
            for i in self.ingress
            if i.namespace == namespace and i.service == name and i.target_ip is not None
            and i.target is not TargetType.CLUSTER_IP_SERVICE
        }  # fmt: skip

    def pod_ip(self, namespace: str, ip: IPv4Address) -> IPv4Address | None:
        """The global IP of the pod ``ip`` in ``namespace`` when it backs an exported headless service."""
        for i in self.ingress:
            if i.namespace == namespace and i.target is TargetType.HEADLESS_SERVICE_POD and i.target_ip == ip:
                return i.global_ip
        return None


def _ingress(obj: GlobalIngressIP, status: GlobalIPStatus | None) -> IngressAddress | None:
    if status is None or not status.allocated_ips:
        return None
    service = obj.target_ref.name if obj.target_ref.kind == SERVICE else obj.service_name
    return IngressAddress(
        namespace=obj.namespace,
        name=obj.name,
        service=service,
        target=obj.target,
        target_ip=obj.target_ip,
        global_ip=status.allocated_ips[0],
    )


class Reader:
    """Reads every cluster's view again and again (a wait polls it): one ``FileBroker`` per cluster, kept, so a
    read rescans only changed files and logs the broker's initial sync once."""

    def __init__(self, broker_dir: Path, gateways: Mapping[str, tuple[str, ...]]) -> None:
        self._brokers = {cid: FileBroker(broker_dir, local_cluster=cid) for cid in gateways}
        self._gateways = dict(gateways)

    def read(self) -> dict[str, ClusterView]:
        """Cluster id -> its view (``gateways``: cluster id -> its gateway node names)."""
        out = {}
        for cid, broker in self._brokers.items():
            broker.scan()
            out[cid] = _view(broker, cid, self._gateways[cid])
        return out


def read_cluster(broker_dir: Path, cluster: str, gateways: tuple[str, ...]) -> ClusterView:
    """The allocations of ``cluster`` (``gateways``: its gateway node names); an empty view when unreadable."""
    return Reader(broker_dir, {cluster: gateways}).read()[cluster]


def _view(broker: FileBroker, cluster: str, gateways: tuple[str, ...]) -> ClusterView:
    snap = broker.snapshot
    if snap is None:
        return ClusterView(cluster=cluster)
    return cluster_view(cluster, snap.globalnet, gateways)


def cluster_view(cluster: str, gn: Globalnet, gateways: tuple[str, ...]) -> ClusterView:
    """The allocations of ``gn`` (from any source: the file broker here, the emulators in ``kube_view``)."""
    egress: dict[str, Addresses] = {}
    for node in gateways:
        status = gn.status_of(ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", gateway_egress_name(node)))
        if status is not None and status.allocated_ips:
            egress[node] = status.allocated_ips
    objects: dict[Key, dict[str, Addresses]] = {}
    for ref, status in gn.statuses:
        if ref.kind == GLOBAL_EGRESS_IP and status.allocated_ips:
            objects[(ref.namespace, ref.name)] = {b.node: b.ips for b in status.gateways if b.ips}
    return ClusterView(cluster=cluster, ingress=ingress_addresses(gn), gateway_egress=egress, egress_objects=objects)


def ingress_addresses(gn: Globalnet) -> tuple[IngressAddress, ...]:
    """Every GlobalIngressIP of ``gn`` that has its address."""
    found = (
        _ingress(obj, gn.status_of(ObjectRef(GLOBAL_INGRESS_IP, obj.namespace, obj.name))) for obj in gn.ingress_ips
    )
    return tuple(i for i in found if i is not None)
