"""The values of one cluster of the lab's topology: its shape, services and extra pods (docs/lab.md).

Plain values, below the parsers that make them (``magw.lab.spec.topology`` for the clusterset's shape,
``magw.lab.spec.globalnet`` for the workload and Globalnet keys, ``magw.lab.spec.egressgw`` for the VIPs).
"""

from __future__ import annotations

from ipaddress import IPv4Network

import attrs

DEFAULT_SERVICE_PORT = 8080
DEFAULT_NAMESPACE = "default"
DEFAULT_CLUSTER_EGRESS_IPS = 8

Labels = tuple[tuple[str, str], ...]


@attrs.frozen(kw_only=True)
class PodSpec:
    """A pod besides the ``pods_per_node`` ones: ``node`` is a node short name (``gw1``, ``w2``)."""

    name: str
    node: str
    namespace: str = DEFAULT_NAMESPACE
    labels: Labels = ()


@attrs.frozen(kw_only=True)
class GlobalEgressSpec:
    """A GlobalEgressIP. ``pod_selector`` is its ``matchLabels``: None = no selector (namespace-wide)."""

    name: str
    namespace: str = DEFAULT_NAMESPACE
    number_of_ips: int = 1
    pod_selector: Labels | None = None


@attrs.frozen(kw_only=True)
class ServiceSpec:
    """A service. Its backends are the pods its ``selector`` picks (labels, in its namespace) or, without one,
    ``backends`` (pod short names like ``w1-p1``, or extra pod names); neither means p1 of every node.
    ``headless``: no ClusterIP (and no kube-proxy rule); ``export``: a ServiceExport (Globalnet)."""

    name: str
    port: int = DEFAULT_SERVICE_PORT
    backends: tuple[str, ...] = ()
    namespace: str = DEFAULT_NAMESPACE
    selector: Labels | None = None
    headless: bool = False
    export: bool = False


@attrs.frozen(kw_only=True)
class ClusterSpec:
    id: str
    pod_cidr: IPv4Network
    service_cidr: IPv4Network
    gateways: int = 2
    workers: int = 2
    pods_per_node: int = 2
    services: tuple[ServiceSpec, ...] = (ServiceSpec(name="echo"),)
    pods: tuple[PodSpec, ...] = ()
    # Globalnet only (None / defaults otherwise):
    global_cidr: IPv4Network | None = None
    cluster_egress_ips: int = DEFAULT_CLUSTER_EGRESS_IPS
    global_egress_ips: tuple[GlobalEgressSpec, ...] = ()
    # Gateways added to the running lab (``magw lab add-gateway``, docs/lab.md): after the workers, without pods,
    # so that nothing laid out before them moves.
    added_gateways: int = 0

    @property
    def added_shorts(self) -> tuple[str, ...]:
        """The added gateways' short names, numbered on from the topology's: ``gw3``, ``gw4``."""
        return tuple(f"gw{self.gateways + k}" for k in range(1, self.added_gateways + 1))

    @property
    def node_shorts(self) -> tuple[str, ...]:
        """The short names of the nodes that have pods, gateways first: ``gw1``, ``gw2``, ``w1`` (not the added
        gateways: ``added_shorts``)."""
        return (*(f"gw{k}" for k in range(1, self.gateways + 1)), *(f"w{k}" for k in range(1, self.workers + 1)))

    @property
    def default_pods(self) -> tuple[str, ...]:
        """The short names of the ``pods_per_node`` pods: ``gw1-p1``, ..."""
        return tuple(f"{n}-p{i}" for n in self.node_shorts for i in range(1, self.pods_per_node + 1))
