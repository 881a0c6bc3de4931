"""The Globalnet part of the snapshot and of the file broker: YAML values -> ``magw.model.globalnet``. Pure.

The way back is ``magw.snapshot.dump``.

The same item shapes serve the snapshot's ``globalnet:`` section (lists per kind) and the broker's
documents (one object per document, plus ``kind`` and ``cluster``). Field names: the workloads (Namespace,
Pod, Service, ServiceExport) use the broker's snake_case; the Globalnet kinds keep the Kubernetes field
names of their CRDs (``numberOfIPs``, ``podSelector``, ``allocatedIPs``...). ``docs/snapshot-format.md``
and ``docs/filebroker.md`` list every field.

Errors are ``FieldError`` (path + reason), one line. Two rules are deliberate:

- ``numberOfIPs`` must be an integer, of any value: a value out of 0..20 is the controller's to report in
  the object's status (docs/globalnet.md), not a reason to refuse the document;
- a ``podSelector`` that does not parse does not refuse the document either: the object keeps the reason
  in ``pod_selector_error`` and gets a status saying so.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from ipaddress import IPv4Address
from typing import Any, Protocol, TypeVar

from magw.model.globalnet import (
    CLUSTER_GLOBAL_EGRESS_DEFAULT_IPS,
    GLOBAL_EGRESS_DEFAULT_IPS,
    ClusterGlobalEgressIP,
    ConditionStatus,
    GatewayAddresses,
    GlobalEgressIP,
    GlobalIngressIP,
    GlobalIPStatus,
    Globalnet,
    GlobalnetCondition,
    Namespace,
    ObjectRef,
    Pod,
    PodPhase,
    Service,
    ServiceExport,
    ServicePort,
    TargetType,
)
from magw.model.selector import LabelSelector, SelectorError, parse_selector
from magw.snapshot.fields import FieldError, Fields, boolean, integer, ipv4, item_path, sequence, string

_T = TypeVar("_T")
_BIG = 2**31 - 1

# The snapshot's globalnet section: key -> (parser, model field of Globalnet)
SECTION_KEYS = (
    "namespaces",
    "pods",
    "services",
    "service_exports",
    "cluster_global_egress_ips",
    "global_egress_ips",
    "global_ingress_ips",
    "statuses",
)

# The fields of each kind's item (a broker document adds ``kind`` and ``cluster``).
FIELDS: dict[str, tuple[str, ...]] = {
    "Namespace": ("name", "labels"),
    "Pod": ("namespace", "name", "ip", "labels", "node", "phase", "host_network"),
    "Service": (
        "namespace",
        "name",
        "cluster_ip",
        "selector",
        "ports",
        "endpoint_addresses",
        "publish_not_ready",
    ),
    "ServiceExport": ("namespace", "name"),
    "ClusterGlobalEgressIP": ("name", "numberOfIPs"),
    "GlobalEgressIP": ("namespace", "name", "numberOfIPs", "podSelector"),
    "GlobalIngressIP": ("namespace", "name", "target", "serviceName", "targetRef", "targetIP"),
    "GlobalnetStatus": ("object", "allocatedIPs", "allocatedIP", "gateways", "podSelector", "conditions"),
}


def _labels(value: object, path: str) -> dict[str, str]:
    if value is None:
        return {}
    f = Fields(value, path, allowed=None)
    out = {}
    for key in f.names():
        raw = f.required(key)
        if not isinstance(raw, str):
            raise FieldError(f.at(key), "a label value must be a string")
        out[key] = raw
    return out


def _ip_list(value: object, path: str) -> list[IPv4Address]:
    return [ipv4(v, item_path(path, i)) for i, v in enumerate(sequence(value, path))]


def _opt(f: Fields, key: str, parse: Callable[[object, str], _T], default: _T) -> _T:
    return parse(f.optional(key), f.at(key)) if f.has(key) else default


def namespace(value: object, path: str) -> Namespace:
    f = Fields(value, path, FIELDS["Namespace"])
    return Namespace(
        name=string(f.required("name"), f.at("name")), labels=_labels(f.optional("labels"), f.at("labels"))
    )


def _phase(value: object, path: str) -> PodPhase:
    text = string(value, path)
    try:
        return PodPhase(text)
    except ValueError:
        known = ", ".join(p.value for p in PodPhase)
        raise FieldError(path, f"{text!r} is not a pod phase ({known})") from None


def pod(value: object, path: str) -> Pod:
    f = Fields(value, path, FIELDS["Pod"])
    return Pod(
        namespace=string(f.required("namespace"), f.at("namespace")),
        name=string(f.required("name"), f.at("name")),
        ip=_opt(f, "ip", ipv4, None),
        labels=_labels(f.optional("labels"), f.at("labels")),
        node=_opt(f, "node", string, ""),
        phase=_opt(f, "phase", _phase, PodPhase.RUNNING),
        host_network=_opt(f, "host_network", boolean, False),
    )


def _port(value: object, path: str) -> ServicePort:
    f = Fields(value, path, ("port", "protocol", "name", "target_port"))
    protocol = _opt(f, "protocol", string, "TCP")
    if protocol not in ("TCP", "UDP", "SCTP"):
        raise FieldError(f.at("protocol"), f"{protocol!r} is not TCP, UDP or SCTP")
    return ServicePort(
        port=integer(f.required("port"), f.at("port"), low=1, high=65535),
        protocol=protocol,
        name=_opt(f, "name", string, ""),
        target_port=_opt(f, "target_port", lambda v, p: integer(v, p, low=1, high=65535), None),
    )


def service(value: object, path: str) -> Service:
    f = Fields(value, path, FIELDS["Service"])
    raw_ip = f.optional("cluster_ip")
    cluster_ip = None if raw_ip in (None, "None") else ipv4(raw_ip, f.at("cluster_ip"))
    selector = _labels(f.optional("selector"), f.at("selector")) if f.has("selector") else None
    ports = [
        _port(p, item_path(f.at("ports"), i)) for i, p in enumerate(sequence(f.optional("ports") or [], f.at("ports")))
    ]
    addresses: list[IPv4Address] = _opt(f, "endpoint_addresses", _ip_list, [])
    if addresses and (cluster_ip is not None or selector is not None):
        raise FieldError(f.at("endpoint_addresses"), "only a headless service without a selector names its addresses")
    return Service(
        namespace=string(f.required("namespace"), f.at("namespace")),
        name=string(f.required("name"), f.at("name")),
        cluster_ip=cluster_ip,
        selector=selector,
        ports=tuple(ports),
        endpoint_addresses=addresses,
        publish_not_ready=_opt(f, "publish_not_ready", boolean, False),
    )


def service_export(value: object, path: str) -> ServiceExport:
    f = Fields(value, path, FIELDS["ServiceExport"])
    return ServiceExport(
        namespace=string(f.required("namespace"), f.at("namespace")), name=string(f.required("name"), f.at("name"))
    )


def _count(f: Fields, default: int) -> int:
    return _opt(f, "numberOfIPs", lambda v, p: integer(v, p, low=-_BIG, high=_BIG), default)


def cluster_egress_ip(value: object, path: str) -> ClusterGlobalEgressIP:
    f = Fields(value, path, FIELDS["ClusterGlobalEgressIP"])
    return ClusterGlobalEgressIP(
        name=string(f.required("name"), f.at("name")), number_of_ips=_count(f, CLUSTER_GLOBAL_EGRESS_DEFAULT_IPS)
    )


def _selector(f: Fields) -> tuple[LabelSelector | None, str]:
    if "podSelector" not in f.names():
        return None, ""
    raw = f.optional("podSelector")
    try:
        return parse_selector({} if raw is None else raw, f.at("podSelector")), ""
    except SelectorError as exc:
        return None, str(exc)


def egress_ip(value: object, path: str) -> GlobalEgressIP:
    f = Fields(value, path, FIELDS["GlobalEgressIP"])
    selector, error = _selector(f)
    return GlobalEgressIP(
        namespace=string(f.required("namespace"), f.at("namespace")),
        name=string(f.required("name"), f.at("name")),
        number_of_ips=_count(f, GLOBAL_EGRESS_DEFAULT_IPS),
        pod_selector=selector,
        pod_selector_error=error,
    )


def object_ref(value: object, path: str) -> ObjectRef:
    f = Fields(value, path, ("kind", "namespace", "name"))
    ns = f.optional("namespace")
    if ns is not None and not isinstance(ns, str):
        raise FieldError(f.at("namespace"), "expected a string")
    return ObjectRef(string(f.required("kind"), f.at("kind")), ns or "", string(f.required("name"), f.at("name")))


def _target(value: object, path: str) -> TargetType:
    text = string(value, path)
    try:
        return TargetType(text)
    except ValueError:
        known = ", ".join(t.value for t in TargetType)
        raise FieldError(path, f"{text!r} is not a target type ({known})") from None


def ingress_ip(value: object, path: str) -> GlobalIngressIP:
    f = Fields(value, path, FIELDS["GlobalIngressIP"])
    return GlobalIngressIP(
        namespace=string(f.required("namespace"), f.at("namespace")),
        name=string(f.required("name"), f.at("name")),
        target=_target(f.required("target"), f.at("target")),
        service_name=string(f.required("serviceName"), f.at("serviceName")),
        target_ref=object_ref(f.required("targetRef"), f.at("targetRef")),
        target_ip=_opt(f, "targetIP", ipv4, None),
    )


def _condition(value: object, path: str) -> GlobalnetCondition:
    f = Fields(value, path, ("type", "status", "reason", "message", "lastTransitionTime"))
    status_text = string(f.required("status"), f.at("status"))
    try:
        status = ConditionStatus(status_text)
    except ValueError:
        raise FieldError(f.at("status"), f"{status_text!r} is not True, False or Unknown") from None
    message = f.optional("message")
    return GlobalnetCondition(
        type=string(f.required("type"), f.at("type")),
        status=status,
        reason=string(f.required("reason"), f.at("reason")),
        message=message if isinstance(message, str) else "",
        time=_opt(f, "lastTransitionTime", string, ""),
    )


def _gateway(value: object, path: str) -> GatewayAddresses:
    f = Fields(value, path, ("node", "allocatedIPs", "goneSince"))
    return GatewayAddresses(
        node=string(f.required("node"), f.at("node")),
        ips=_opt(f, "allocatedIPs", _ip_list, []),
        gone_since=_opt(f, "goneSince", string, ""),
    )


def status(value: object, path: str) -> tuple[ObjectRef, GlobalIPStatus]:
    """A GlobalnetStatus body: ``object`` names what it is the status of."""
    f = Fields(value, path, FIELDS["GlobalnetStatus"])
    ref = object_ref(f.required("object"), f.at("object"))
    selector = None
    if f.has("podSelector"):
        try:
            selector = parse_selector(f.optional("podSelector"), f.at("podSelector"))
        except SelectorError as exc:
            raise FieldError(f.at("podSelector"), str(exc)) from None
    conditions = [
        _condition(c, item_path(f.at("conditions"), i))
        for i, c in enumerate(sequence(f.optional("conditions") or [], f.at("conditions")))
    ]
    gateways = [
        _gateway(g, item_path(f.at("gateways"), i))
        for i, g in enumerate(sequence(f.optional("gateways") or [], f.at("gateways")))
    ]
    addresses: list[IPv4Address] = _opt(f, "allocatedIPs", _ip_list, [])
    if f.optional("allocatedIP"):  # a GlobalIngressIP's one address
        addresses = [*addresses, ipv4(f.optional("allocatedIP"), f.at("allocatedIP"))]
    return ref, GlobalIPStatus(
        conditions=tuple(conditions),
        allocated_ips=addresses,
        gateways=gateways,
        pod_selector=selector,
    )


_PARSERS: dict[str, Callable[[object, str], Any]] = {
    "namespaces": namespace,
    "pods": pod,
    "services": service,
    "service_exports": service_export,
    "cluster_global_egress_ips": cluster_egress_ip,
    "global_egress_ips": egress_ip,
    "global_ingress_ips": ingress_ip,
    "statuses": status,
}
MODEL_FIELD = {
    "namespaces": "namespaces",
    "pods": "pods",
    "services": "services",
    "service_exports": "service_exports",
    "cluster_global_egress_ips": "cluster_egress_ips",
    "global_egress_ips": "egress_ips",
    "global_ingress_ips": "ingress_ips",
    "statuses": "statuses",
}


def item_parser(section: str) -> Callable[[object, str], Any]:
    """The parser of one item of ``section`` (a key of the globalnet section)."""
    return _PARSERS[section]


def identity(key: str, item: Any) -> tuple[str, ...]:
    """What must be unique within a list: (namespace, name), or the status's object reference."""
    if key == "statuses":
        ref = item[0]
        return (ref.kind, ref.namespace, ref.name)
    return (getattr(item, "namespace", ""), item.name)


class ItemCache(Protocol):
    """``magw.snapshot.load.ParseCache``'s ``item``: an earlier parse of an equal item of the same section."""

    def item(self, section: str, value: object, path: str, parse: Callable[[object, str], _T]) -> _T: ...


# Sections whose items a cache hands back as the very objects of the last parse when they did not change: the
# pods, so that a Globalnet gateway's incremental planner finds the one pod that changed among 100k by identity
# (magw.desired.globalnet.incremental; docs/performance.md, row 22b). Their items hold no path.
CACHED_SECTIONS = ("pods",)


def parse_globalnet(raw: object, path: str = "globalnet", *, cache: ItemCache | None = None) -> Globalnet:
    """The snapshot's ``globalnet:`` section; with ``cache``, unchanged pods are the objects of its last parse."""
    f = Fields(raw, path, SECTION_KEYS)
    values: dict[str, list[Any]] = {}
    for key in SECTION_KEYS:
        items = sequence(f.optional(key), f.at(key)) if f.has(key) else []
        parse = _PARSERS[key]
        if cache is not None and key in CACHED_SECTIONS:
            parse = functools.partial(cache.item, f"globalnet.{key}", parse=parse)
        parsed = [parse(item, item_path(f.at(key), i)) for i, item in enumerate(items)]
        seen: dict[tuple[str, ...], int] = {}
        for i, item in enumerate(parsed):
            ident = identity(key, item)
            if ident in seen:
                first = item_path(f.at(key), seen[ident])
                raise FieldError(
                    item_path(f.at(key), i), f"{'/'.join(x for x in ident if x)} is listed twice (first at {first})"
                )
            seen[ident] = i
        values[MODEL_FIELD[key]] = parsed
    return Globalnet(**values)


def status_from_doc(raw: Mapping[str, Any], where: str) -> tuple[ObjectRef, GlobalIPStatus]:
    """A GlobalnetStatus body; ``ValueError`` (one line, starting with ``where``) when it is not one."""
    try:
        return status(dict(raw), "")
    except FieldError as exc:
        raise ValueError(f"{where}: {exc.path}: {exc.reason}" if exc.path else f"{where}: {exc.reason}") from None
