"""Kubernetes objects -> the file broker's documents (``magw.sources.file.documents``). Pure: dicts in, Documents out.

The Kubernetes source (``magw.sources.kube.source``) keeps the raw objects its reflectors list and watch, and
maps each one here into the documents the file broker would hold for it, with the same kinds and fields. The
same ``assemble()`` then builds the Snapshot, so the planners, the health monitor and the Globalnet controller
see the same model values whichever source feeds them (docs/kubernetes.md lists every mapping).

Every function takes the object as the API sends it (JSON as dicts: camelCase keys) and returns the
documents of that object, or raises ``MappingError`` (one line) for an object that cannot be used yet, such as
a Node without an InternalIP or without the CNI annotation its route agent writes. The caller logs it and
keeps the object's last good documents, as the file broker does for a bad file.

Each document's ``file`` is the object's origin (``kube:Node/e-w1``) so that a problem names the object;
statuses use the file broker's status file names (``globalnet_store.status_file``) so that the Globalnet
controller's check "is one of my statuses unreadable?" (``problem_files(status_prefix)``) works unchanged.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec, TypeVar

import yaml

from magw.model.cable import NAT_SOURCE_FIELD, PUBLIC_KEY_FIELD, PUBLIC_PORT_FIELD
from magw.model.globalnet import CLUSTER_GLOBAL_EGRESS_IP, GLOBAL_EGRESS_IP, GLOBAL_INGRESS_IP, ObjectRef
from magw.sources.file.documents import Document, DocumentError, to_document
from magw.sources.file.globalnet_store import status_file

Obj = Mapping[str, Any]

GATEWAY_LABEL = "submariner.io/gateway"
CNI_IP_ANNOTATION = "submariner.io/cniIfaceIp"
PUBLIC_IP_ANNOTATION = "gateway.submariner.io/public-ip"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
CONFIG_MAP = "magw-config"
SUBMARINER = "submariner"

# Globalnet kinds: the CRD status keys that become a GlobalnetStatus document, and the condition keys the
# document keeps (observedGeneration is the API's, not the model's).
STATUS_KEYS = ("allocatedIPs", "allocatedIP", "gateways", "podSelector", "conditions")
_CONDITION_KEYS = ("type", "status", "reason", "message", "lastTransitionTime")


class MappingError(ValueError):
    """An object that cannot be mapped; ``str()`` is one line naming the object."""


class NotYet(MappingError):
    """An object that will be mappable once someone fills it in (a Node before its InternalIP or before its route
    agent wrote the CNI annotation): expected for a moment at start, so not a warning."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


def odd_fields(kind: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A mapping of ``kind`` objects: a field of a shape it does not expect (a bool where the CRD says an object,
    a string for a list, a port that is not a mapping, ...) raises ``MappingError`` naming the object, one line,
    like every other refusal, instead of the TypeError or AttributeError of reading it; the object's last good
    documents stay in use (``KubeSource._remap``). Found by fuzzing (docs/fuzzing.md)."""

    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def mapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return fn(*args, **kwargs)
            except MappingError:
                raise
            except (TypeError, AttributeError, KeyError, ValueError) as exc:
                obj = next((a for a in args if isinstance(a, Mapping)), None)
                label = args[0] if args and isinstance(args[0], str) else kind  # globalnet_docs(kind, obj, ...)
                where = origin(label, obj) if obj is not None else f"kube:{label}"
                reason = " ".join(f"{type(exc).__name__}: {exc}".split())
                raise MappingError(f"{where}: a field of an unexpected shape ({reason})") from None

        return mapped

    return wrap


def origin(kind: str, obj: Obj) -> str:
    """``kube:Node/e-w1``, ``kube:Pod/default/web-0``: the ``file`` of the object's documents."""
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace"), _printable(meta.get("name"))
    return f"kube:{kind}/{_printable(ns)}/{name}" if ns else f"kube:{kind}/{name}"


def _printable(value: object) -> str:
    """A name as it is, or quoted with escapes when it holds a newline or another control character: the origin
    is part of every one-line error (the API server refuses such names; a fuzzer sent one)."""
    text = str(value)
    return text if text.isprintable() else repr(text)


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name") or "")


def _namespace(obj: Obj) -> str:
    return str(_meta(obj).get("namespace") or "")


def _doc(raw: dict[str, Any], file: str, index: int = 0) -> Document:
    try:
        return to_document(raw, file=file, index=index)
    except DocumentError as exc:
        raise MappingError(str(exc)) from None


def _labels(obj: Obj) -> dict[str, str]:
    labels = _meta(obj).get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _status(obj: Obj) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


# ----- nodes -------------------------------------------------------------------------------------------


def internal_ip(node: Obj) -> str | None:
    """The Node's InternalIP (the node IP magw uses), or None."""
    for address in _status(node).get("addresses") or ():
        if isinstance(address, Mapping) and address.get("type") == "InternalIP":
            return str(address.get("address"))
    return None


def public_ip(node: Obj) -> str | None:
    """The gateway's public address from ``gateway.submariner.io/public-ip`` (``ipv4:A.B.C.D`` or ``A.B.C.D``)."""
    raw = (_meta(node).get("annotations") or {}).get(PUBLIC_IP_ANNOTATION)
    if not raw:
        return None
    text = str(raw).removeprefix("ipv4:")
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise MappingError(f"{origin('Node', node)}: {PUBLIC_IP_ANNOTATION}: {raw!r} is not ipv4:<address>") from None


def pod_cidrs(node: Obj) -> list[str]:
    """The node's IPv4 share of the pod CIDR: ``spec.podCIDRs``, or ``spec.podCIDR`` without it (older API
    servers), in order; IPv6 entries (a dual-stack cluster) are left out. Host bits are cleared, as Kubernetes
    reads the value (Go's ParseCIDR); a value that is not a CIDR is refused like a bad public IP."""
    spec, where = _spec(node), origin("Node", node)
    if spec.get("podCIDRs"):
        key, items = "podCIDRs", spec["podCIDRs"]
    else:
        key, items = "podCIDR", [spec["podCIDR"]] if spec.get("podCIDR") else []
    if not isinstance(items, list):
        raise MappingError(f"{where}: spec.{key}: {items!r} is not a list of CIDRs")
    out = []
    for item in items:
        try:
            net = ipaddress.ip_network(item if isinstance(item, str) and "/" in item else "", strict=False)
        except ValueError:
            raise MappingError(f"{where}: spec.{key}: {item!r} is not a CIDR") from None
        if net.version == 4:
            out.append(str(net))
    return out


@odd_fields("Node")
def node_docs(node: Obj, cluster: str) -> tuple[Document, ...]:
    """A Node document: InternalIP, the CNI annotation, the gateway label, the public IP annotation, the IPv4
    pod CIDRs (only when there are some: an older build's Node document has no such key)."""
    where = origin("Node", node)
    ip = internal_ip(node)
    if ip is None:
        raise NotYet(f"{where}: no InternalIP in status.addresses yet")
    cni = (_meta(node).get("annotations") or {}).get(CNI_IP_ANNOTATION)
    if not cni:
        raise NotYet(f"{where}: no {CNI_IP_ANNOTATION} annotation yet (its route agent writes it)")
    raw: dict[str, Any] = {
        "kind": "Node",
        "cluster": cluster,
        "name": _name(node),
        "ip": ip,
        "cni_ip": str(cni),
        "gateway": _labels(node).get(GATEWAY_LABEL) == "true",
    }
    public = public_ip(node)
    if public is not None:
        raw["public_ip"] = public
    cidrs = pod_cidrs(node)
    if cidrs:
        raw["pod_cidrs"] = cidrs
    return (_doc(raw, where),)


# ----- the submariner.io kinds shared through the broker ------------------------------------------------


@odd_fields("Cluster")
def cluster_docs(obj: Obj) -> tuple[Document, ...]:
    """A Cluster CR (``cluster_id``, ``cluster_cidr``, ``service_cidr``, ``global_cidr``) -> a Cluster document."""
    spec = _spec(obj)
    raw: dict[str, Any] = {
        "kind": "Cluster",
        "id": spec.get("cluster_id"),
        "pod_cidrs": list(spec.get("cluster_cidr") or []),
        "service_cidrs": list(spec.get("service_cidr") or []),
    }
    if spec.get("global_cidr"):
        raw["global_cidrs"] = list(spec["global_cidr"])
    return (_doc(raw, origin("Cluster", obj)),)


@odd_fields("Endpoint")
def endpoint_docs(obj: Obj) -> tuple[Document, ...]:
    """An Endpoint CR -> an Endpoint document (``cluster_id`` -> ``cluster``; the seed's ``allocated_ips``)."""
    spec = _spec(obj)
    raw: dict[str, Any] = {
        "kind": "Endpoint",
        "cluster": spec.get("cluster_id"),
        "hostname": spec.get("hostname"),
        "private_ip": spec.get("private_ip"),
    }
    for key in ("public_ip", "subnets", "allocated_ips"):
        if spec.get(key):
            raw[key] = spec[key]
    if spec.get("backend") == "wireguard":  # other backends (Submariner's libreswan, ours vxlan): the VXLAN cable
        raw["backend"] = "wireguard"
    raw_config = spec.get("backend_config")
    config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
    # ours of Submariner's backend_config keys: the WireGuard key, the load balancer's port and the NAT's source
    # address (docs/load-balancer.md)
    kept = {k: config[k] for k in (PUBLIC_KEY_FIELD, PUBLIC_PORT_FIELD, NAT_SOURCE_FIELD) if config.get(k)}
    if kept:
        raw["backend_config"] = kept
    return (_doc(raw, origin("Endpoint", obj)),)


def endpoint_object_name(cluster: str, hostname: str) -> str:
    """``<cluster_id>-<hostname>``, the name of a gateway's Endpoint object (lower case: a DNS-1123 name)."""
    return f"{cluster}-{hostname}".lower()


def endpoint_spec(doc: Mapping[str, Any]) -> dict[str, Any]:
    """An Endpoint document's fields (``magw.snapshot.load.endpoint_doc``) as an Endpoint CR's spec."""
    spec: dict[str, Any] = {
        "cluster_id": doc["cluster"],
        "hostname": doc["hostname"],
        "private_ip": doc["private_ip"],
        "backend": doc.get("backend", "vxlan"),
    }
    for key in ("public_ip", "subnets", "allocated_ips", "backend_config"):
        if doc.get(key):
            spec[key] = doc[key]
    return spec


@odd_fields("Config")
def config_docs(submariner: Obj | None, config_map: Obj | None) -> tuple[Document, ...]:
    """The Config document: the seed's ``multiActiveGatewayEnabled`` (default false) and ``cni`` (``ovn`` when
    Submariner's ``networkPlugin`` is ``OVNKubernetes``) from the Submariner object, the rest (``strategy``,
    ``underlayMTU``, ``resilient``, ``cable``, ``wireguardPort``, ``keepClientIP``: ``true`` or ``false``) from
    the ConfigMap ``magw-config``."""
    raw: dict[str, Any] = {"kind": "Config"}
    spec = _spec(submariner) if submariner is not None else {}
    raw["multi_active_gateway"] = bool(spec.get("multiActiveGatewayEnabled", False))
    if str(spec.get("networkPlugin", "")).lower() == "ovnkubernetes":  # Submariner's own field; others: generic
        raw["cni"] = "ovn"
    data = (config_map or {}).get("data") or {}
    where = origin("ConfigMap", config_map) if config_map is not None else "kube:Config"
    if "strategy" in data:
        raw["strategy"] = data["strategy"]
    if "underlayMTU" in data:
        try:
            raw["underlay_mtu"] = int(data["underlayMTU"])
        except ValueError:
            raise MappingError(f"{where}: underlayMTU: {data['underlayMTU']!r} is not an integer") from None
    if "cable" in data:
        raw["cable"] = data["cable"]
    if "wireguardPort" in data:
        try:
            raw["wireguard_port"] = int(data["wireguardPort"])
        except ValueError:
            raise MappingError(f"{where}: wireguardPort: {data['wireguardPort']!r} is not an integer") from None
    if "keepClientIP" in data:
        keep = data["keepClientIP"]
        if not isinstance(keep, str) or keep.strip().lower() not in ("true", "false"):
            raise MappingError(f"{where}: keepClientIP: {keep!r} is not true or false")
        raw["keep_client_ip"] = keep.strip().lower() == "true"
    if "resilient" in data:
        try:
            raw["resilient"] = yaml.safe_load(data["resilient"])
        except yaml.YAMLError:
            raise MappingError(f"{where}: resilient: not a YAML mapping") from None
    return (_doc(raw, where),)


# ----- workloads (the Globalnet controller and the route agents' Globalnet planner read them) -------------


@odd_fields("Namespace")
def namespace_docs(obj: Obj, cluster: str) -> tuple[Document, ...]:
    raw: dict[str, Any] = {"kind": "Namespace", "cluster": cluster, "name": _name(obj)}
    if _labels(obj):
        raw["labels"] = _labels(obj)
    return (_doc(raw, origin("Namespace", obj)),)


@odd_fields("Pod")
def pod_docs(obj: Obj, cluster: str) -> tuple[Document, ...]:
    spec, status = _spec(obj), _status(obj)
    raw: dict[str, Any] = {"kind": "Pod", "cluster": cluster, "namespace": _namespace(obj), "name": _name(obj)}
    if status.get("podIP"):
        raw["ip"] = status["podIP"]
    if _labels(obj):
        raw["labels"] = _labels(obj)
    if spec.get("nodeName"):
        raw["node"] = spec["nodeName"]
    raw["phase"] = status.get("phase") or "Pending"
    if spec.get("hostNetwork"):
        raw["host_network"] = True
    return (_doc(raw, origin("Pod", obj)),)


def _ports(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for port in spec.get("ports") or ():
        item: dict[str, Any] = {"port": port.get("port"), "protocol": port.get("protocol") or "TCP"}
        if port.get("name"):
            item["name"] = port["name"]
        if isinstance(port.get("targetPort"), int):  # a named target port is resolved by kube-proxy, not us
            item["target_port"] = port["targetPort"]
        out.append(item)
    return out


def slice_addresses(slices: Iterable[Obj], *, publish_not_ready: bool) -> list[str]:
    """The IPv4 addresses of a Service's EndpointSlices: ready ones (``conditions.ready`` absent counts as
    ready, as the API says), or every one when the Service publishes not-ready addresses."""
    out: set[str] = set()
    for piece in slices:
        if piece.get("addressType", "IPv4") != "IPv4":
            continue
        for endpoint in piece.get("endpoints") or ():
            ready = (endpoint.get("conditions") or {}).get("ready")
            if ready is False and not publish_not_ready:
                continue
            out.update(str(a) for a in endpoint.get("addresses") or ())
    return sorted(out, key=lambda a: ipaddress.IPv4Address(a))


@odd_fields("Service")
def service_docs(obj: Obj, cluster: str, slices: Iterable[Obj] = ()) -> tuple[Document, ...]:
    """A Service plus its EndpointSlices -> a Service document (``clusterIP: None`` is headless)."""
    spec = _spec(obj)
    raw: dict[str, Any] = {
        "kind": "Service",
        "cluster": cluster,
        "namespace": _namespace(obj),
        "name": _name(obj),
    }
    cluster_ip = spec.get("clusterIP")
    if cluster_ip and cluster_ip != "None":
        raw["cluster_ip"] = cluster_ip
    if spec.get("selector") is not None:
        raw["selector"] = dict(spec["selector"])
    if _ports(spec):
        raw["ports"] = _ports(spec)
    publish = bool(spec.get("publishNotReadyAddresses"))
    # Only a headless Service without a selector names its backends by address (its EndpointSlices are written
    # by hand); for every other Service the model finds them from the selector and the pods, and the snapshot
    # refuses addresses on it.
    headless_manual = "cluster_ip" not in raw and spec.get("selector") is None
    try:
        addresses = slice_addresses(slices, publish_not_ready=publish) if headless_manual else []
    except ValueError as exc:  # an EndpointSlice address that is not IPv4 (e.g. '09.1.3.21'): keep the last good
        raise MappingError(f"{origin('Service', obj)}: endpoint slices: {exc}") from None
    if addresses:
        raw["endpoint_addresses"] = addresses
    if publish:
        raw["publish_not_ready"] = True
    return (_doc(raw, origin("Service", obj)),)


@odd_fields("ServiceExport")
def service_export_docs(obj: Obj, cluster: str) -> tuple[Document, ...]:
    raw = {"kind": "ServiceExport", "cluster": cluster, "namespace": _namespace(obj), "name": _name(obj)}
    return (_doc(raw, origin("ServiceExport", obj)),)


# ----- the Globalnet kinds: the spec is the object's document, the status a GlobalnetStatus document -----


def _status_doc(kind: str, obj: Obj, cluster: str) -> Document | None:
    status = _status(obj)
    if not any(status.get(key) for key in STATUS_KEYS):
        return None  # never written by the controller: no status document
    # A ClusterGlobalEgressIP is cluster-wide in the model (its CRD object lives in magw's namespace)
    ref = ObjectRef(kind, "" if kind == CLUSTER_GLOBAL_EGRESS_IP else _namespace(obj), _name(obj))
    raw: dict[str, Any] = {"kind": "GlobalnetStatus", "cluster": cluster, "object": {"kind": kind, "name": ref.name}}
    if ref.namespace:
        raw["object"]["namespace"] = ref.namespace
    for key in STATUS_KEYS:
        if key in status and key != "conditions":
            raw[key] = status[key]
    raw["conditions"] = [
        {k: v for k, v in c.items() if k in _CONDITION_KEYS} for c in status.get("conditions") or () if c
    ]
    try:
        file = status_file(cluster, ref)
    except ValueError as exc:
        raise MappingError(f"{origin(kind, obj)}: {exc}") from None
    return _doc(raw, file, index=1)


@odd_fields("Globalnet")
def globalnet_docs(kind: str, obj: Obj, cluster: str) -> tuple[Document, ...]:
    """ClusterGlobalEgressIP, GlobalEgressIP or GlobalIngressIP -> its document (+ its status document)."""
    spec = _spec(obj)
    raw: dict[str, Any] = {"kind": kind, "cluster": cluster, "name": _name(obj)}
    if kind != CLUSTER_GLOBAL_EGRESS_IP:
        raw["namespace"] = _namespace(obj)
    if kind in (CLUSTER_GLOBAL_EGRESS_IP, GLOBAL_EGRESS_IP) and "numberOfIPs" in spec:
        raw["numberOfIPs"] = spec["numberOfIPs"]
    if kind == GLOBAL_EGRESS_IP and "podSelector" in spec:
        raw["podSelector"] = spec["podSelector"]
    if kind == GLOBAL_INGRESS_IP:
        target = spec.get("target")
        obj_ref = spec.get("objRef")
        ref_name = (obj_ref.get("name") if isinstance(obj_ref, Mapping) else None) or spec.get("serviceName")
        raw["target"] = target
        raw["serviceName"] = spec.get("serviceName")
        raw["targetRef"] = {
            "kind": "Pod" if target == "HeadlessServicePod" else "Service",
            "namespace": _namespace(obj),
            "name": ref_name,
        }
        if spec.get("targetIP"):
            raw["targetIP"] = spec["targetIP"]
    docs = [_doc(raw, origin(kind, obj))]
    status = _status_doc(kind, obj, cluster)
    if status is not None:
        docs.append(status)
    return tuple(docs)


@odd_fields("EgressVIP")
def egress_vip_docs(obj: Obj, cluster: str) -> tuple[Document, ...]:
    """An EgressVIP CR (deploy/crds/submariner.io_egressvips.yaml) -> its EgressVIP document, plus its
    EgressVIPStatus document once the controller has written a status (``holder`` or ``services`` present, even
    empty: a VIP nobody holds and nobody uses has a status too, else the controller would write it again at
    every pass). The fields are the CRD's (docs/egress-gateway.md)."""
    spec = _spec(obj)
    raw: dict[str, Any] = {"kind": "EgressVIP", "cluster": cluster, "name": _name(obj)}
    raw.update({k: spec[k] for k in ("vip", "vrid", "candidates", "bindings") if k in spec})
    docs = [_doc(raw, origin("EgressVIP", obj))]
    status = _status(obj)
    if "holder" in status or "services" in status:
        body = {k: status[k] for k in ("holder", "since", "services", "conflicts") if k in status}
        docs.append(
            _doc(
                {"kind": "EgressVIPStatus", "cluster": cluster, "name": _name(obj), **body}, origin("EgressVIP", obj), 1
            )
        )
    return tuple(docs)


EGRESS_CONFIG = "default"  # the only EgressConfig magw reads (deploy/crds/submariner.io_egressconfigs.yaml)


@odd_fields("EgressConfig")
def egress_config_docs(obj: Obj, cluster: str) -> tuple[Document, ...]:
    """The EgressConfig CR ``default`` in magw's namespace -> the cluster's EgressConfig document (the same
    fields: ``vipRanges``, ``advertInt``, ``conntrackSync``). Another name is refused: a second config would
    make two documents of one identity."""
    where = origin("EgressConfig", obj)
    if _name(obj) != EGRESS_CONFIG:
        raise MappingError(f"{where}: only the EgressConfig named {EGRESS_CONFIG} is read")
    spec = _spec(obj)
    raw: dict[str, Any] = {"kind": "EgressConfig", "cluster": cluster}
    raw.update({k: spec[k] for k in ("vipRanges", "advertInt", "conntrackSync") if k in spec})
    return (_doc(raw, where),)
