"""Addressing: every namespace, interface address and route of a lab, derived from its topology.

Pure and deterministic. Cluster ``i`` (0-based, in topology order):

- underlay ``172.(17+i).0.0/24``: gateway ``k`` is ``.(10+k)``, worker ``k`` is ``.(100+k)``. Node IPs differ
  in their low 24 bits inside a cluster (240/8 VTEPs) and gateways differ across clusters (241/8 VTEPs).
- node ``j`` (gateways first, then workers, from 0) owns the ``(j+1)``-th /24 of the pod CIDR; its ``cni0``
  has ``.1`` (the node's CNI IP), its pods ``.2``, ``.3``, ...
- gateway ``k`` has the public (WAN) IP ``198.18.0.(10*(i+1)+k)/24``; with ``load_balancer`` it has no WAN link:
  the cluster's ``cloud`` namespace holds the public IP ``198.18.0.(200+i)`` and gateway ``k`` is its port
  ``45000+k`` there (``magw.lab.spec.cloud``).
- gateways added to the running lab (``added_gateways``) come after the workers: gateway ``gateways+k`` (its
  number, underlay and WAN IP as if the topology had it) with the next /24 after the workers', and no pods.
- service ``s`` has the ClusterIP ``<service network> + 10 + s``; a headless service has none (``cluster_ip`` is
  None) but keeps its slot in ``ip``, so the ClusterIPs of the services after it do not move.
- a node's extra pods (topology ``pods:``) come after its ``pods_per_node`` pods: the next index, so the next
  address, namespace and host interface. The default pods are labelled ``app: echo`` and ``pod: <short name>``
  and live in Kubernetes namespace ``default``.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Literal

import attrs

from magw.lab.spec import naming
from magw.lab.spec.cloud import CloudLayout, cloud_layout, public_port
from magw.lab.spec.cluster import DEFAULT_NAMESPACE, ClusterSpec, GlobalEgressSpec, Labels, PodSpec, ServiceSpec
from magw.lab.spec.topology import Topology

WAN_SUBNET = IPv4Network("198.18.0.0/24")
ECHO_PORT = 8080

Role = Literal["gateway", "worker"]


@attrs.frozen(kw_only=True)
class NodeLayout:
    name: str
    short: str
    cluster: str
    role: Role
    namespace: str
    node_ip: IPv4Address
    cni_ip: IPv4Address
    pod_subnet: IPv4Network
    public_ip: IPv4Address | None  # what the gateway publishes: its WAN IP, or its cluster's cloud's
    wan_ip: IPv4Address | None = None  # its own link on the WAN bridge (None behind a cloud, and on workers)
    public_port: int | None = None  # its listener on the cloud's public IP (load_balancer only)
    nat_source_ip: IPv4Address | None = None  # the cloud's NAT address its packets leave with (load_balancer only)

    @property
    def gateway(self) -> bool:
        return self.role == "gateway"


@attrs.frozen(kw_only=True)
class PodLayout:
    """A pod. ``name`` is unique in the clusterset (``east-w1-p1``, ``east-db-0``), ``short`` in its cluster: it
    is the Kubernetes pod name (``w1-p1``, ``db-0``). ``namespace`` is the NETWORK namespace (as for every lab
    layout value); ``kube_namespace`` the Kubernetes one."""

    name: str
    short: str
    cluster: str
    node: str
    namespace: str
    host_if: str
    ip: IPv4Address
    kube_namespace: str = DEFAULT_NAMESPACE
    labels: Labels = ()

    def matches(self, selector: Labels) -> bool:
        """True when the pod's labels include every pair of ``selector`` (a Service's selector)."""
        return set(selector) <= set(self.labels)


@attrs.frozen(kw_only=True)
class ServiceLayout:
    """A service. ``ip`` is its slot's address; only ``cluster_ip`` says whether it has one (not when headless).
    ``selector`` None: the backends were named (or defaulted), and the Service has no selector."""

    name: str
    cluster: str
    ip: IPv4Address
    port: int
    target_port: int
    backends: tuple[IPv4Address, ...]
    namespace: str = DEFAULT_NAMESPACE
    selector: Labels | None = None
    headless: bool = False
    export: bool = False

    @property
    def cluster_ip(self) -> IPv4Address | None:
        return None if self.headless else self.ip


@attrs.frozen(kw_only=True)
class ClusterLayout:
    id: str
    index: int
    pod_cidr: IPv4Network
    service_cidr: IPv4Network
    underlay: IPv4Network
    underlay_ns: str
    nodes: tuple[NodeLayout, ...]
    pods: tuple[PodLayout, ...]
    services: tuple[ServiceLayout, ...]
    # Globalnet only (None / defaults otherwise):
    global_cidr: IPv4Network | None = None
    cluster_egress_ips: int = 8
    global_egress_ips: tuple[GlobalEgressSpec, ...] = ()
    cloud: CloudLayout | None = None  # the cloud in front of the gateways (topology ``load_balancer``)

    @property
    def gateways(self) -> tuple[NodeLayout, ...]:
        return tuple(n for n in self.nodes if n.gateway)

    def pods_of(self, node: str) -> tuple[PodLayout, ...]:
        return tuple(p for p in self.pods if p.node == node)


@attrs.frozen(kw_only=True)
class LabLayout:
    name: str
    topology: Topology
    clusters: tuple[ClusterLayout, ...]
    wan_ns: str
    wan_subnet: IPv4Network = WAN_SUBNET

    @property
    def nodes(self) -> tuple[NodeLayout, ...]:
        return tuple(n for c in self.clusters for n in c.nodes)

    @property
    def pods(self) -> tuple[PodLayout, ...]:
        return tuple(p for c in self.clusters for p in c.pods)

    @property
    def gateways(self) -> tuple[NodeLayout, ...]:
        return tuple(n for c in self.clusters for n in c.gateways)

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace of the lab, infrastructure first, in creation order."""
        infra = (self.wan_ns, *(c.underlay_ns for c in self.clusters))
        infra += tuple(c.cloud.namespace for c in self.clusters if c.cloud is not None)
        if self.topology.egressgw is not None:
            infra = (*infra, naming.outside_ns(self.name))
        return (*infra, *(n.namespace for n in self.nodes), *(p.namespace for p in self.pods))

    def cluster(self, cluster_id: str) -> ClusterLayout:
        for c in self.clusters:
            if c.id == cluster_id:
                return c
        raise KeyError(cluster_id)

    def node(self, name: str) -> NodeLayout:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


def layout(name: str, topology: Topology) -> LabLayout:
    """The complete addressing plan of lab ``name``."""
    naming.check_lab_name(name)
    behind_cloud = topology.load_balancer is not None
    clusters = tuple(_cluster(name, i, spec, behind_cloud) for i, spec in enumerate(topology.clusters))
    return LabLayout(name=name, topology=topology, clusters=clusters, wan_ns=naming.wan_ns(name))


def _cluster(lab: str, index: int, spec: ClusterSpec, behind_cloud: bool) -> ClusterLayout:
    underlay = IPv4Network(f"172.{17 + index}.0.0/24")
    cloud = cloud_layout(naming.cloud_ns(lab, spec.id), index, WAN_SUBNET, underlay) if behind_cloud else None
    shorts: list[tuple[str, Role, int]] = [(f"gw{k}", "gateway", k) for k in range(1, spec.gateways + 1)]
    shorts += [(f"w{k}", "worker", k) for k in range(1, spec.workers + 1)]
    shorts += [(short, "gateway", spec.gateways + k) for k, short in enumerate(spec.added_shorts, 1)]
    subnets = spec.pod_cidr.subnets(new_prefix=24)
    next(subnets)  # the first /24 stays unused: node j gets the (j+1)-th, so 10.1.1.0/24 is east-gw1's
    nodes: list[NodeLayout] = []
    pods: list[PodLayout] = []
    for short, role, k in shorts:
        subnet = next(subnets)
        host = 10 + k if role == "gateway" else 100 + k
        wan_ip = WAN_SUBNET.network_address + 10 * (index + 1) + k if role == "gateway" and cloud is None else None
        node = NodeLayout(
            name=naming.node_name(spec.id, short),
            short=short,
            cluster=spec.id,
            role=role,
            namespace=naming.node_ns(lab, spec.id, short),
            node_ip=underlay.network_address + host,
            cni_ip=subnet.network_address + 1,
            pod_subnet=subnet,
            public_ip=cloud.public_ip if cloud is not None and role == "gateway" else wan_ip,
            wan_ip=wan_ip,
            public_port=public_port(k) if cloud is not None and role == "gateway" else None,
            nat_source_ip=cloud.nat_ip if cloud is not None and role == "gateway" else None,
        )
        nodes.append(node)
        if short in spec.added_shorts:  # an added gateway has no pods (docs/lab.md, "Adding a gateway")
            continue
        pods += [_pod(lab, spec.id, node, p) for p in range(1, spec.pods_per_node + 1)]
        extra = [x for x in spec.pods if x.node == short]
        pods += [_extra_pod(lab, spec.id, node, spec.pods_per_node + 1 + j, x) for j, x in enumerate(extra)]
    return ClusterLayout(
        id=spec.id,
        index=index,
        pod_cidr=spec.pod_cidr,
        service_cidr=spec.service_cidr,
        underlay=underlay,
        underlay_ns=naming.underlay_ns(lab, spec.id),
        nodes=tuple(nodes),
        pods=tuple(pods),
        services=_services(spec, pods),
        global_cidr=spec.global_cidr,
        cluster_egress_ips=spec.cluster_egress_ips,
        global_egress_ips=spec.global_egress_ips,
        cloud=cloud,
    )


def _pod(lab: str, cluster: str, node: NodeLayout, index: int) -> PodLayout:
    short = naming.pod_short(node.short, index)
    return PodLayout(
        name=naming.pod_name(cluster, node.short, index),
        short=short,
        cluster=cluster,
        node=node.name,
        namespace=naming.pod_ns(lab, cluster, node.short, index),
        host_if=naming.pod_host_if(index),
        ip=node.pod_subnet.network_address + 1 + index,
        labels=(("app", "echo"), ("pod", short)),
    )


def _extra_pod(lab: str, cluster: str, node: NodeLayout, index: int, spec: PodSpec) -> PodLayout:
    """A topology ``pods:`` entry: the node's ``index``-th pod, with its own name, namespace and labels."""
    return attrs.evolve(
        _pod(lab, cluster, node, index),
        name=f"{cluster}-{spec.name}",  # cluster ids have no '-': unique across the clusterset
        short=spec.name,
        kube_namespace=spec.namespace,
        labels=spec.labels,
    )


def _backends(svc: ServiceSpec, pods: list[PodLayout], p1: set[str]) -> tuple[IPv4Address, ...]:
    """By selector: the pods of the service's namespace that it matches; else the named pods; else every p1."""
    if svc.selector is not None:
        return tuple(p.ip for p in pods if p.kube_namespace == svc.namespace and p.matches(svc.selector))
    if svc.backends:
        by_short = {p.short: p for p in pods}
        return tuple(by_short[b].ip for b in svc.backends)
    return tuple(p.ip for p in pods if p.short in p1)


def _services(spec: ClusterSpec, pods: list[PodLayout]) -> tuple[ServiceLayout, ...]:
    p1 = {naming.pod_short(n, 1) for n in spec.node_shorts}  # an extra pod cannot have such a name (topology)
    out = []
    for s, svc in enumerate(spec.services):
        out.append(
            ServiceLayout(
                name=svc.name,
                cluster=spec.id,
                ip=spec.service_cidr.network_address + 10 + s,
                port=svc.port,
                target_port=ECHO_PORT,
                backends=_backends(svc, pods, p1),
                namespace=svc.namespace,
                selector=svc.selector,
                headless=svc.headless,
                export=svc.export,
            )
        )
    return tuple(out)
