"""The Globalnet part of the lab's topology (docs/lab.md): extra pods, service selectors, global CIDRs, egress objects.

Kept apart from ``magw.lab.spec.topology`` so that file stays about one concern (the clusterset's shape); this one
reads the workload keys a Globalnet lab needs (into the values of ``magw.lab.spec.cluster``): ``pods``, a service's
``namespace``/``selector``/``headless``/``export``, and per cluster ``global_cidr``, ``cluster_egress_ips`` and
``global_egress_ips``. The key names are those of docs/lab.md (scripts are written against them). Errors are one
line, like every topology error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Network
from typing import Any

from magw.lab.spec.cluster import DEFAULT_NAMESPACE, ClusterSpec, GlobalEgressSpec, Labels, PodSpec, ServiceSpec
from magw.lab.spec.parser import Parser

MAX_EXTRA_PODS = 64
MAX_EGRESS_OBJECTS = 16
# numberOfIPs of the lab's objects: the controller accepts 0..20 and reports anything else in a status; a lab
# object that can never get an address is a typo, so the lab asks for 1..20.
MAX_IPS = 20
# A Kubernetes name (DNS-1123 label), kept short: ``pod-<name>`` must stay a 63-character object name.
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
# Label keys and values, simplified from Kubernetes' syntax: letters, digits and ``._/-``.
LABEL_KEY_RE = re.compile(r"^[A-Za-z0-9._/-]{1,63}$")
LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9._/-]{0,63}$")
# Keys that only mean something with ``globalnet: true``.
GLOBALNET_CLUSTER_KEYS = ("global_cidr", "cluster_egress_ips", "global_egress_ips")
# The keys this part adds to the topology (magw.lab.spec.topology): at the top, per cluster (``pods`` is
# accepted in any lab), per service.
TOP_KEYS = frozenset({"globalnet"})
CLUSTER_KEYS = frozenset({*GLOBALNET_CLUSTER_KEYS, "pods"})
SERVICE_KEYS = frozenset({"namespace", "selector", "headless", "export"})


def default_global_cidr(index: int) -> str:
    """Cluster ``index`` (0-based)'s global CIDR when the topology names none."""
    return f"242.{index + 1}.0.0/16"


def labels(p: Parser, value: object, path: str) -> Labels:
    """A str -> str label mapping, sorted (values are compared as sets of pairs)."""
    if not isinstance(value, Mapping):
        raise p.fail(path, f"must be a mapping, got {type(value).__name__}")
    out = []
    for key, val in value.items():
        if not isinstance(key, str) or not LABEL_KEY_RE.match(key):
            raise p.fail(path, f"{key!r} is not a label key (letters, digits and ._/-, 1-63 chars)")
        if not isinstance(val, str) or not LABEL_VALUE_RE.match(val):
            raise p.fail(f"{path}.{key}", f"{val!r} is not a label value (a string of letters, digits and ._/-)")
        out.append((key, val))
    return tuple(sorted(out))


def name(p: Parser, value: object, path: str, what: str) -> str:
    return p.string(value, path, NAME_RE, f"a {what} (a-z0-9 and '-', 1-40 chars, not starting or ending with '-')")


def pods(p: Parser, value: object, path: str, nodes: Sequence[str], default_pods: set[str]) -> tuple[PodSpec, ...]:
    """The cluster's ``pods:``; names are unique in the cluster and are not those of the default pods."""
    out: list[PodSpec] = []
    for i, item in enumerate(p.sequence(value, path, min_len=0, max_len=MAX_EXTRA_PODS)):
        ipath = f"{path}[{i}]"
        doc = p.mapping(item, ipath, {"name", "namespace", "node", "labels"})
        for key in ("name", "node"):
            if key not in doc:
                raise p.fail(f"{ipath}.{key}", "is required")
        pod_name = name(p, doc["name"], f"{ipath}.name", "pod name")
        if pod_name in default_pods:
            raise p.fail(f"{ipath}.name", f"{pod_name!r} is the name of a pods_per_node pod")
        if any(o.name == pod_name for o in out):
            raise p.fail(f"{ipath}.name", f"duplicate pod {pod_name!r}")
        node = doc["node"]
        if node not in nodes:
            raise p.fail(f"{ipath}.node", f"{node!r} is not a node of this cluster ({', '.join(nodes)})")
        out.append(
            PodSpec(
                name=pod_name,
                node=node,
                namespace=name(p, doc.get("namespace", DEFAULT_NAMESPACE), f"{ipath}.namespace", "namespace"),
                labels=labels(p, doc.get("labels", {}), f"{ipath}.labels"),
            )
        )
    return tuple(out)


def service_extras(p: Parser, doc: Mapping[str, Any], path: str, globalnet: bool) -> dict[str, Any]:
    """A service's ``namespace``, ``selector``, ``headless`` and ``export`` (as ServiceSpec keyword arguments)."""
    selector = None
    if "selector" in doc:
        if doc.get("backends"):  # an empty list is no backends (to_doc writes one)
            raise p.fail(f"{path}.selector", "selector and backends exclude each other")
        selector = labels(p, doc["selector"], f"{path}.selector")
    export = p.boolean(doc.get("export", False), f"{path}.export")
    if export and not globalnet:
        raise p.fail(f"{path}.export", "needs globalnet: true")
    return {
        "namespace": name(p, doc.get("namespace", DEFAULT_NAMESPACE), f"{path}.namespace", "namespace"),
        "selector": selector,
        "headless": p.boolean(doc.get("headless", False), f"{path}.headless"),
        "export": export,
    }


def global_egress_ips(p: Parser, value: object, path: str) -> tuple[GlobalEgressSpec, ...]:
    out: list[GlobalEgressSpec] = []
    for i, item in enumerate(p.sequence(value, path, min_len=0, max_len=MAX_EGRESS_OBJECTS)):
        ipath = f"{path}[{i}]"
        doc = p.mapping(item, ipath, {"name", "namespace", "number_of_ips", "pod_selector"})
        if "name" not in doc:
            raise p.fail(f"{ipath}.name", "is required")
        spec = GlobalEgressSpec(
            name=name(p, doc["name"], f"{ipath}.name", "GlobalEgressIP name"),
            namespace=name(p, doc.get("namespace", DEFAULT_NAMESPACE), f"{ipath}.namespace", "namespace"),
            number_of_ips=p.integer(doc.get("number_of_ips", 1), f"{ipath}.number_of_ips", 1, MAX_IPS),
            pod_selector=_pod_selector(p, doc, f"{ipath}.pod_selector"),
        )
        if any((o.namespace, o.name) == (spec.namespace, spec.name) for o in out):
            raise p.fail(f"{ipath}.name", f"duplicate GlobalEgressIP {spec.namespace}/{spec.name}")
        out.append(spec)
    return tuple(out)


def _pod_selector(p: Parser, doc: Mapping[str, Any], path: str) -> Labels | None:
    if "pod_selector" not in doc:
        return None
    sel = p.mapping(doc["pod_selector"], path, {"matchLabels"})
    return labels(p, sel.get("matchLabels", {}), f"{path}.matchLabels")


def check_globalnet_keys(p: Parser, doc: Mapping[str, Any], path: str, globalnet: bool) -> None:
    """Refuse a Globalnet-only key in a topology without ``globalnet: true`` (it would be silently unused)."""
    if globalnet:
        return
    for key in GLOBALNET_CLUSTER_KEYS:
        if key in doc:
            raise p.fail(f"{path}.{key}", "needs globalnet: true")


def addresses_needed(spec: ClusterSpec) -> int:
    """An upper bound of the global addresses the controller allocates for ``spec``: per gateway its cluster
    egress IPs and a block of every GlobalEgressIP, plus one per exported service or headless backend."""
    per_gateway = spec.cluster_egress_ips + sum(e.number_of_ips for e in spec.global_egress_ips)
    pods = spec.gateways * spec.pods_per_node + spec.workers * spec.pods_per_node + len(spec.pods)
    one_to_one = sum(pods if s.headless else 1 for s in spec.services if s.export)
    return (spec.gateways + spec.added_gateways) * per_gateway + one_to_one


def check_global_cidrs(
    p: Parser, clusters: Sequence[ClusterSpec], reserved: Sequence[tuple[str, IPv4Network]]
) -> None:
    """Global CIDRs overlap nothing: each other, any cluster's pod or service CIDR, the lab's own ranges."""
    for i, c in enumerate(clusters):
        gpath = f"clusters[{i}].global_cidr"
        net = c.global_cidr
        if net is None:  # never: parse_topology sets it on every cluster of a Globalnet topology
            continue
        for what, rnet in reserved:
            if net.overlaps(rnet):
                raise p.fail(gpath, f"{net} overlaps {what} ({rnet})")
        for other in clusters:
            for field, onet in (("pod_cidr", other.pod_cidr), ("service_cidr", other.service_cidr)):
                if net.overlaps(onet):
                    raise p.fail(gpath, f"{net} overlaps {field} {onet} of cluster {other.id}")
        for j in range(i):
            gnet = clusters[j].global_cidr
            if gnet is not None and net.overlaps(gnet):
                raise p.fail(gpath, f"{net} overlaps global_cidr {gnet} of cluster {clusters[j].id}")
        needed = addresses_needed(c)
        if net.num_addresses - 2 < needed:
            raise p.fail(gpath, f"{net} has fewer than the {needed} addresses this cluster's objects may need")


def _label_doc(value: Labels) -> dict[str, str]:
    return dict(value)


def service_doc_extras(s: ServiceSpec) -> dict[str, Any]:
    """The non-default Globalnet keys of a service, for ``Topology.to_doc`` (old state files stay as they were)."""
    doc: dict[str, Any] = {}
    if s.namespace != DEFAULT_NAMESPACE:
        doc["namespace"] = s.namespace
    if s.selector is not None:
        doc["selector"] = _label_doc(s.selector)
    if s.headless:
        doc["headless"] = True
    if s.export:
        doc["export"] = True
    return doc


def cluster_doc_extras(c: ClusterSpec, globalnet: bool) -> dict[str, Any]:
    """The Globalnet keys of a cluster, for ``Topology.to_doc``."""
    doc: dict[str, Any] = {}
    if c.pods:
        doc["pods"] = [
            {"name": x.name, "namespace": x.namespace, "node": x.node, "labels": _label_doc(x.labels)} for x in c.pods
        ]
    if globalnet:
        doc["global_cidr"] = str(c.global_cidr)
        doc["cluster_egress_ips"] = c.cluster_egress_ips
        doc["global_egress_ips"] = [_egress_doc(e) for e in c.global_egress_ips]
    return doc


def _egress_doc(e: GlobalEgressSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": e.name, "namespace": e.namespace, "number_of_ips": e.number_of_ips}
    if e.pod_selector is not None:
        doc["pod_selector"] = {"matchLabels": _label_doc(e.pod_selector)}
    return doc
