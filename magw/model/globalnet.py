"""Globalnet values: the local cluster's workloads and its global-IP objects with their statuses (pure).

These are the inputs of the Globalnet controller's IPAM (``magw.ipam``) and, later, of the Globalnet
datapath planner. The file broker and the snapshot loader build them from YAML documents (field names in
``docs/globalnet.md``); the Kubernetes sources will build the same values from the API.

Objects are identified by an ``ObjectRef`` (kind, namespace, name); cluster-scoped kinds have namespace "".
Statuses are kept apart from the objects (``Globalnet.statuses``), keyed by that reference, because the
controller is their only writer while users write the objects.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import IPv4Address
from typing import Any

import attrs

from magw.model.selector import LabelSelector

# The limits of numberOfIPs (docs/globalnet.md): a request outside them gets a status, not an exception.
MIN_IPS = 0
MAX_IPS = 20
CLUSTER_GLOBAL_EGRESS_DEFAULT_IPS = 8
GLOBAL_EGRESS_DEFAULT_IPS = 1

# Kinds, as they appear in ObjectRef.kind and in the broker's documents.
NAMESPACE = "Namespace"
POD = "Pod"
SERVICE = "Service"
SERVICE_EXPORT = "ServiceExport"
CLUSTER_GLOBAL_EGRESS_IP = "ClusterGlobalEgressIP"
GLOBAL_EGRESS_IP = "GlobalEgressIP"
GLOBAL_INGRESS_IP = "GlobalIngressIP"


def _labels(value: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted(items))


def _addresses(value: Iterable[IPv4Address]) -> tuple[IPv4Address, ...]:
    return tuple(sorted(set(value)))


@attrs.frozen(order=True)
class ObjectRef:
    """Names one object: ``ObjectRef("GlobalEgressIP", "ns1", "db-pods")``; namespace "" when cluster-scoped."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


class PodPhase(enum.Enum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@attrs.frozen(kw_only=True)
class Namespace:
    name: str
    labels: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_labels)


@attrs.frozen(kw_only=True)
class Pod:
    """A pod of the local cluster. ``ip`` is None until the pod has one."""

    namespace: str
    name: str
    ip: IPv4Address | None = None
    labels: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_labels)
    node: str = ""
    phase: PodPhase = PodPhase.RUNNING
    host_network: bool = False

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


@attrs.frozen(kw_only=True)
class ServicePort:
    port: int
    protocol: str = "TCP"
    name: str = ""
    target_port: int | None = None


@attrs.frozen(kw_only=True)
class Service:
    """A Service. ``cluster_ip`` None means headless (``clusterIP: None``).

    ``selector`` None means a service without a selector; a headless one then names its backends in
    ``endpoint_addresses`` (what its EndpointSlices hold). ``publish_not_ready`` is
    ``publishNotReadyAddresses``: its selected pods count as backends before they are Running.
    """

    namespace: str
    name: str
    cluster_ip: IPv4Address | None = None
    selector: tuple[tuple[str, str], ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_labels)
    )
    ports: tuple[ServicePort, ...] = ()
    endpoint_addresses: tuple[IPv4Address, ...] = attrs.field(default=(), converter=_addresses)
    publish_not_ready: bool = False

    @property
    def headless(self) -> bool:
        return self.cluster_ip is None


@attrs.frozen(kw_only=True)
class ServiceExport:
    """Exports the Service of the same namespace and name to the clusterset."""

    namespace: str
    name: str


@attrs.frozen(kw_only=True)
class ClusterGlobalEgressIP:
    """Cluster-wide egress addresses. ``number_of_ips`` is kept as given; the controller checks its range."""

    name: str
    number_of_ips: int = CLUSTER_GLOBAL_EGRESS_DEFAULT_IPS


@attrs.frozen(kw_only=True)
class GlobalEgressIP:
    """Egress addresses for a namespace (``pod_selector`` None) or for the pods a selector picks.

    ``pod_selector_error`` holds the one-line reason when the document's podSelector could not be parsed;
    the object then exists (it gets a status saying so) but selects nothing.
    """

    namespace: str
    name: str
    number_of_ips: int = GLOBAL_EGRESS_DEFAULT_IPS
    pod_selector: LabelSelector | None = None
    pod_selector_error: str = ""


class TargetType(enum.Enum):
    CLUSTER_IP_SERVICE = "ClusterIPService"
    HEADLESS_SERVICE_POD = "HeadlessServicePod"
    HEADLESS_SERVICE_ENDPOINTS = "HeadlessServiceEndpoints"


@attrs.frozen(kw_only=True)
class GlobalIngressIP:
    """Made by the controller only: the global IP of an exported service or of one headless backend.

    ``target_ref`` is the full reference of what the address stands for (the Service, the Pod, or for
    ``HeadlessServiceEndpoints`` the Service) and ``target_ip`` the address it translates to (ClusterIP,
    pod IP or endpoint address). ``name`` may be shortened to fit Kubernetes' limits; the reference is not.
    """

    namespace: str
    name: str
    target: TargetType
    service_name: str
    target_ref: ObjectRef
    target_ip: IPv4Address | None = None


class ConditionStatus(enum.Enum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


# Condition types and reasons (docs/globalnet.md lists what a user does about each).
ALLOCATED = "Allocated"
UPDATED = "Updated"


@attrs.frozen(kw_only=True)
class GlobalnetCondition:
    """A ``metav1.Condition`` of a Globalnet status as stored (file broker documents, the snapshot): ``time``
    is RFC 3339 UTC, set by the controller when ``status`` changes. Not ``KubeCondition``
    (``magw.sources.kube.conditions``), the validated value a Kubernetes status writer merges, whose
    transition time is decided against what the API server holds."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    time: str = ""


@attrs.frozen(kw_only=True)
class GatewayAddresses:
    """The addresses of one object that one gateway owns (per-gateway egress, docs/globalnet.md).

    ``gone_since`` is set (RFC 3339) while the gateway is absent; the addresses go back to the pool only
    once it is older than the grace period, so a gateway that comes back keeps them.
    """

    node: str
    ips: tuple[IPv4Address, ...] = attrs.field(converter=_addresses)
    gone_since: str = ""


def _by_node(value: Iterable[GatewayAddresses]) -> tuple[GatewayAddresses, ...]:
    return tuple(sorted(value, key=lambda g: g.node))


@attrs.frozen(kw_only=True)
class GlobalIPStatus:
    """The status of any Globalnet object.

    ``allocated_ips``: every address the object holds (for a GlobalIngressIP, one: ``allocatedIP``).
    ``gateways``: which gateway owns which of them, for per-gateway egress objects; empty otherwise.
    ``pod_selector``: the selector the addresses were allocated for (a GlobalEgressIP's selector cannot
    change; recording it lets a restarted controller see a change). ``selected`` tells whether the
    status recorded a selector at all (None inside it means a namespace-wide object).
    """

    conditions: tuple[GlobalnetCondition, ...] = ()
    allocated_ips: tuple[IPv4Address, ...] = attrs.field(default=(), converter=_addresses)
    gateways: tuple[GatewayAddresses, ...] = attrs.field(default=(), converter=_by_node)
    pod_selector: LabelSelector | None = None

    def condition(self, type_: str) -> GlobalnetCondition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None


@attrs.frozen
class Presorted:
    """Items already in the order ``Globalnet`` keeps them in, taken as they are.

    Shaped for speed: the Kubernetes source's incremental assembly (``magw.sources.file.items``) keeps each
    section sorted as items come and go; sorting 100k pods again with a Python key costs about 50 ms per
    event (docs/performance.md, row 22c). Its property test holds the order equal to a sort's.
    """

    items: Sequence[Any]


def ref_key(item: Any) -> tuple[str, str]:
    """The order of every section but the statuses: (namespace, name), namespace "" when cluster-scoped."""
    return (getattr(item, "namespace", ""), getattr(item, "name", ""))


def _sorted_by_ref(value: Iterable[Any] | Presorted) -> tuple[Any, ...]:
    if isinstance(value, Presorted):
        return tuple(value.items)
    return tuple(sorted(value, key=ref_key))


def _statuses(
    value: Mapping[ObjectRef, GlobalIPStatus] | Iterable[tuple[ObjectRef, GlobalIPStatus]] | Presorted,
) -> tuple[tuple[ObjectRef, GlobalIPStatus], ...]:
    if isinstance(value, Presorted):
        return tuple(value.items)
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted(items, key=lambda p: p[0]))


@attrs.frozen(kw_only=True)
class Globalnet:
    """Everything Globalnet reads about the local cluster. Empty when the clusterset is not Globalnet.

    Each tuple is sorted by (namespace, name); ``statuses`` by reference.
    """

    namespaces: tuple[Namespace, ...] = attrs.field(default=(), converter=_sorted_by_ref)
    pods: tuple[Pod, ...] = attrs.field(default=(), converter=_sorted_by_ref)
    services: tuple[Service, ...] = attrs.field(default=(), converter=_sorted_by_ref)
    service_exports: tuple[ServiceExport, ...] = attrs.field(default=(), converter=_sorted_by_ref)
    cluster_egress_ips: tuple[ClusterGlobalEgressIP, ...] = attrs.field(default=(), converter=_sorted_by_ref)
    egress_ips: tuple[GlobalEgressIP, ...] = attrs.field(default=(), converter=_sorted_by_ref)
    ingress_ips: tuple[GlobalIngressIP, ...] = attrs.field(default=(), converter=_sorted_by_ref)
    statuses: tuple[tuple[ObjectRef, GlobalIPStatus], ...] = attrs.field(default=(), converter=_statuses)
    # Statuses by reference, computed once: the controller looks one up per object.
    _status_index: dict[ObjectRef, GlobalIPStatus] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_status_index", dict(self.statuses))

    def status_of(self, ref: ObjectRef) -> GlobalIPStatus | None:
        return self._status_index.get(ref)

    @property
    def empty(self) -> bool:
        parts = (self.namespaces, self.pods, self.services, self.service_exports, self.cluster_egress_ips)
        return not any(parts) and not (self.egress_ips or self.ingress_ips or self.statuses)
