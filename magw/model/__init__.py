"""Frozen input values: the cluster state a planner works from.

Everything here is a plain value (attrs frozen). Nothing here does I/O; the
snapshot loader (``magw.snapshot.load``) builds these from YAML and validates them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.model.cable import Cable
from magw.model.egressgw import EgressGateway
from magw.model.globalnet import Globalnet
from magw.model.netfast import net_key as net_key  # re-exported: the planner and the checks import it from here


class Strategy(enum.Enum):
    """How traffic is spread over several gateways.

    ``resilient``: a nexthop object per gateway and a resilient group (kernel >= 5.13).
    ``group``: the same with a plain (hash-threshold) group (kernel >= 5.3).
    ``multipath``: classic routes with several inline nexthops (any kernel).
    """

    RESILIENT = "resilient"
    GROUP = "group"
    MULTIPATH = "multipath"


class Cni(enum.Enum):
    """The cluster's network plugin, which decides how pod traffic reaches the gateways.

    ``generic``: a host-gw style CNI with kube-proxy: workers reach the gateways over our VXLAN mesh.
    ``ovn``: OVN-Kubernetes: OVN carries pod traffic to the gateway (``submariner_router``); the node side is
    tables 149/150 and ``ovn-k8s-sub0`` (docs/ovn-node.md).
    """

    GENERIC = "generic"
    OVN = "ovn"


def dotted(ip: int) -> str:
    """``a.b.c.d`` of an IPv4 address given as an int (what ``str(IPv4Address(ip))`` prints, in a fraction of
    its time: shaped for speed, docs/performance.md, where 100k addresses are formatted per plan)."""
    return f"{ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}"


def _nets(value: Iterable[IPv4Network]) -> tuple[IPv4Network, ...]:
    unique = {net_key(net): net for net in value}  # dedup on int keys: an equal key is an equal network
    return tuple(unique[key] for key in sorted(unique))


@attrs.frozen(kw_only=True)
class Cluster:
    """One cluster of the clusterset and the address ranges it owns."""

    id: str
    pod_cidrs: tuple[IPv4Network, ...] = attrs.field(converter=_nets)
    service_cidrs: tuple[IPv4Network, ...] = attrs.field(converter=_nets)
    global_cidrs: tuple[IPv4Network, ...] = attrs.field(default=(), converter=_nets)
    # Every range routed toward this cluster (pods, services, global IPs), computed once: the planner
    # and the checks read it per cluster and per subnet, and re-sorting it each time was a profile hot spot.
    cidrs: tuple[IPv4Network, ...] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "cidrs", _nets((*self.pod_cidrs, *self.service_cidrs, *self.global_cidrs)))


@attrs.frozen(kw_only=True)
class Node:
    """A node of the local cluster."""

    name: str
    ip: IPv4Address
    cni_ip: IPv4Address
    gateway: bool = False
    # The node's share of the pod CIDR (Node ``spec.podCIDRs``): where a gateway steers a remote client's service
    # connection to a backend on this node when ``Config.keep_client_ip`` is on (docs/client-ip.md). Empty:
    # unknown, and such a connection keeps the gateway's SNAT.
    pod_cidrs: tuple[IPv4Network, ...] = attrs.field(default=(), converter=_nets)


def _addresses(value: Iterable[IPv4Address]) -> tuple[IPv4Address, ...]:
    return tuple(sorted(set(value)))


@attrs.frozen(kw_only=True)
class Endpoint:
    """A published gateway of some cluster (local or remote).

    ``private_ip`` is the gateway's node IP inside its cluster; the VTEP
    addresses (240/8, 241/8) are derived from it. ``public_ip`` is where other
    clusters' gateways send the inter-cluster VXLAN; it defaults to the private IP.

    ``backend`` is the cable the gateway runs (Submariner's Endpoint field); with ``wireguard``,
    ``public_key`` is its WireGuard public key (``backend_config.publicKey``). A remote gateway carries
    traffic over a WireGuard cable only once it publishes both (magw.desired.cable).
    """

    cluster: str
    hostname: str
    private_ip: IPv4Address
    public_ip: IPv4Address | None = None
    subnets: tuple[IPv4Network, ...] = attrs.field(default=(), converter=_nets)
    # Globalnet: the cluster egress addresses this gateway SNATs to (the seed's Option 1), published so
    # that remote gateways route replies to them back through this gateway.
    allocated_ips: tuple[IPv4Address, ...] = attrs.field(default=(), converter=_addresses)
    backend: Cable = Cable.VXLAN
    public_key: str | None = None
    # The port other clusters reach this gateway's cable at on ``public_ip`` (``backend_config.publicPort``): a
    # cloud load balancer with one port per gateway (docs/load-balancer.md, design B). None: the cable's own port.
    public_port: int | None = None
    # The source address this gateway's cable packets arrive from at other clusters when a NAT other than the one
    # holding ``public_ip`` translates them (a cloud's NAT gateway beside its load balancer; ``backend_config.
    # natSourceIP``, docs/load-balancer.md). Remote guards admit it; nothing is sent to it.
    nat_source_ip: IPv4Address | None = None
    # Planning only, never published: this node's NAT discovery found the gateway reachable at its private address
    # (docs/load-balancer.md), so the cable goes there, not through the public address and its load balancer.
    private_path: bool = False

    def cable_ready(self, cable: Cable) -> bool:
        """True when this gateway runs ``cable``: always for VXLAN, with its public key for WireGuard."""
        if cable is Cable.VXLAN:
            return True
        return self.backend is Cable.WIREGUARD and self.public_key is not None

    @property
    def underlay_ip(self) -> IPv4Address:
        """The address other clusters tunnel to: the public one unless a private path was found."""
        return self.public_ip if self.public_ip is not None and not self.private_path else self.private_ip

    @property
    def published_underlay_ip(self) -> IPv4Address:
        """The address the gateway publishes for others to tunnel to (whatever this node's NAT discovery found)."""
        return self.public_ip if self.public_ip is not None else self.private_ip

    @property
    def underlay_port(self) -> int | None:
        """The port other clusters send the cable to at ``underlay_ip``: ``public_port``, which only the public
        path has; None: the cable's own port."""
        return self.public_port if self.public_ip is not None and not self.private_path else None


@attrs.frozen(kw_only=True)
class ResilientParams:
    """Parameters of resilient nexthop groups (see the kernel's nexthop-group-resilient doc)."""

    buckets: int = 128
    idle_timer: int = 10
    unbalanced_timer: int = 0


@attrs.frozen(kw_only=True)
class Config:
    """Clusterset-wide settings."""

    multi_active: bool = True
    strategy: Strategy = Strategy.RESILIENT
    underlay_mtu: int = 1500
    resilient: ResilientParams = ResilientParams()
    cni: Cni = Cni.GENERIC
    cable: Cable = Cable.VXLAN
    wireguard_port: int = 51820
    # A remote client's connection to a local Service keeps the client's address to the backend: the ingress
    # gateway steers it over vx-submariner to the backend's node, which returns the replies to that gateway
    # (docs/client-ip.md). Off: the gateway SNATs it to its CNI IP (the seed's step 3-b). Off by default so a
    # cluster turns it on once every node runs a build that has it.
    keep_client_ip: bool = False


def _hostnames(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


ReachInput = Mapping[str, Iterable[str]] | Iterable[tuple[str, Iterable[str]]]


def _reach(value: ReachInput) -> tuple[tuple[str, frozenset[str]], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((gw, frozenset(clusters)) for gw, clusters in items))


@attrs.frozen(kw_only=True)
class Health:
    """What the planning node knows about gateway health.

    ``down``: hostnames of gateways (local or remote) that must not carry traffic.
    ``reach``: for a local gateway hostname, the remote cluster ids it can reach.
    A gateway absent from ``reach`` is assumed to reach every cluster.
    """

    down: frozenset[str] = attrs.field(default=frozenset(), converter=_hostnames)
    reach: tuple[tuple[str, frozenset[str]], ...] = attrs.field(default=(), converter=_reach)

    def usable(self, hostname: str, cluster: str | None = None) -> bool:
        """True when ``hostname`` is up and (if ``cluster`` is given) reaches it."""
        if hostname in self.down:
            return False
        if cluster is None:
            return True
        for gw, clusters in self.reach:
            if gw == hostname:
                return cluster in clusters
        return True


def _clusters(value: Iterable[Cluster]) -> tuple[Cluster, ...]:
    return tuple(sorted(value, key=lambda c: c.id))


def _nodes(value: Iterable[Node]) -> tuple[Node, ...]:
    return tuple(sorted(value, key=lambda n: n.name))


def _endpoints(value: Iterable[Endpoint]) -> tuple[Endpoint, ...]:
    return tuple(sorted(value, key=lambda e: (e.cluster, e.hostname)))


@attrs.frozen(kw_only=True)
class Snapshot:
    """The complete input of a planner: the clusterset as seen from one cluster."""

    local_cluster: str
    clusters: tuple[Cluster, ...] = attrs.field(converter=_clusters)
    nodes: tuple[Node, ...] = attrs.field(converter=_nodes)
    endpoints: tuple[Endpoint, ...] = attrs.field(converter=_endpoints)
    config: Config = Config()
    health: Health = Health()
    # The local cluster's Globalnet objects and statuses (empty unless the clusterset is Globalnet).
    globalnet: Globalnet = attrs.field(factory=Globalnet)
    # The local cluster's egress gateway: config, VIPs and their statuses (empty unless it has EgressVIPs).
    egressgw: EgressGateway = attrs.field(factory=EgressGateway)
    # The cluster objects whose CIDRs the snapshot loader found free of overlaps (magw.snapshot.checks).
    # The planner skips its own overlap check only when these are the very objects of ``clusters``
    # (``overlaps_checked_here``): 0.2 s of a 100k-CIDR plan (docs/performance.md). ``attrs.evolve`` carries the field
    # along, and a snapshot given other clusters is checked again, so the mark cannot vouch for what it
    # did not see.
    overlaps_checked: tuple[Cluster, ...] = attrs.field(default=(), eq=False, repr=False)
    # Endpoints grouped by cluster, computed once: the planner asks per cluster, and scanning every
    # endpoint each time is quadratic in the number of clusters (docs/performance.md).
    _by_cluster: dict[str, tuple[Endpoint, ...]] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        groups: dict[str, list[Endpoint]] = {}
        for endpoint in self.endpoints:
            groups.setdefault(endpoint.cluster, []).append(endpoint)
        object.__setattr__(self, "_by_cluster", {cid: tuple(eps) for cid, eps in groups.items()})

    def overlaps_checked_here(self) -> bool:
        """True when ``overlaps_checked`` holds exactly the objects of ``clusters`` (by identity)."""
        checked = self.overlaps_checked
        return len(checked) == len(self.clusters) and {id(c) for c in checked} == {id(c) for c in self.clusters}

    def cluster(self, cluster_id: str) -> Cluster:
        for c in self.clusters:
            if c.id == cluster_id:
                return c
        raise KeyError(cluster_id)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def remote_clusters(self) -> tuple[Cluster, ...]:
        return tuple(c for c in self.clusters if c.id != self.local_cluster)

    def endpoints_of(self, cluster_id: str) -> tuple[Endpoint, ...]:
        return self._by_cluster.get(cluster_id, ())
