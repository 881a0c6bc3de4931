"""The lab's topology: schema, YAML loader and validation.

A topology says how many clusters, gateways, workers and pods to build, and a
few clusterset settings. Addresses are not part of it: ``magw.lab.spec.layout``
derives them. Every error is one line: ``<source>: <field path>: <reason>``.
The schema is documented in docs/lab.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import attrs
import yaml

from magw.lab.errors import LabInputError
from magw.lab.spec import egressgw as eg
from magw.lab.spec import globalnet as gn
from magw.lab.spec.egressgw import EgressLabSpec, egress_doc
from magw.lab.spec.globalnet import GlobalEgressSpec, Labels, PodSpec
from magw.lab.spec.naming import CLUSTER_ID_RE
from magw.model import Strategy
from magw.snapshot.yamlstrict import StrictLoader

MAX_CLUSTERS = 8
MAX_GATEWAYS = 8
MAX_WORKERS = 32
MAX_PODS_PER_NODE = 16
DEFAULT_SERVICE_PORT = 8080
RATE_RE = re.compile(r"^[1-9][0-9]*(kbit|mbit|gbit)$")

# Ranges the lab uses itself (underlays, WAN, VTEPs): cluster CIDRs must stay clear of them.
RESERVED: tuple[tuple[str, IPv4Network], ...] = (
    ("the lab underlays", IPv4Network("172.16.0.0/12")),
    ("the lab WAN", IPv4Network("198.18.0.0/24")),
    # The VTEPs are 240/8 (inside a cluster) and 241/8 (between clusters), magw.model.vtep: only those two /8s
    # are taken, so Globalnet's customary 242.x.0.0/16 global CIDRs stay legal (240/4 would swallow them).
    ("the VTEP ranges", IPv4Network("240.0.0.0/7")),
    ("loopback", IPv4Network("127.0.0.0/8")),
    ("link-local", IPv4Network("169.254.0.0/16")),
)


@attrs.frozen(kw_only=True)
class ServiceSpec:
    """A service. Its backends are the pods its ``selector`` picks (labels, in its namespace) or, without one,
    ``backends`` (pod short names like ``w1-p1``, or extra pod names); neither means p1 of every node.
    ``headless``: no ClusterIP (and no kube-proxy rule); ``export``: a ServiceExport (Globalnet)."""

    name: str
    port: int = DEFAULT_SERVICE_PORT
    backends: tuple[str, ...] = ()
    namespace: str = gn.DEFAULT_NAMESPACE
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
    cluster_egress_ips: int = gn.DEFAULT_CLUSTER_EGRESS_IPS
    global_egress_ips: tuple[GlobalEgressSpec, ...] = ()

    @property
    def node_shorts(self) -> tuple[str, ...]:
        """The nodes' short names, gateways first: ``gw1``, ``gw2``, ``w1``."""
        return (*(f"gw{k}" for k in range(1, self.gateways + 1)), *(f"w{k}" for k in range(1, self.workers + 1)))

    @property
    def default_pods(self) -> tuple[str, ...]:
        """The short names of the ``pods_per_node`` pods: ``gw1-p1``, ..."""
        return tuple(f"{n}-p{i}" for n in self.node_shorts for i in range(1, self.pods_per_node + 1))


@attrs.frozen(kw_only=True)
class Topology:
    clusters: tuple[ClusterSpec, ...]
    multi_active: bool = True
    strategy: Strategy = Strategy.RESILIENT
    underlay_mtu: int = 1500
    wan_rate: str | None = None
    globalnet: bool = False
    egress: EgressLabSpec | None = None  # the egress gateway's VIPs (magw.lab.spec.egressgw)

    def to_doc(self) -> dict[str, Any]:
        """The topology as a YAML/JSON document that ``parse_topology`` reads back to an equal value."""
        doc: dict[str, Any] = {
            "multi_active": self.multi_active,
            "strategy": self.strategy.value,
            "underlay_mtu": self.underlay_mtu,
            "wan_rate": self.wan_rate,
            "clusters": [
                {
                    "id": c.id,
                    "pod_cidr": str(c.pod_cidr),
                    "service_cidr": str(c.service_cidr),
                    "gateways": c.gateways,
                    "workers": c.workers,
                    "pods_per_node": c.pods_per_node,
                    "services": [
                        {"name": s.name, "port": s.port, "backends": list(s.backends), **gn.service_doc_extras(s)}
                        for s in c.services
                    ],
                    **gn.cluster_doc_extras(c, self.globalnet),
                }
                for c in self.clusters
            ],
        }
        if self.globalnet:
            doc["globalnet"] = True
        if self.egress is not None:
            doc["egress"] = egress_doc(self.egress)
        return doc


def default_topology() -> Topology:
    """Two clusters (east, west), each with 2 gateways, 2 workers, 2 pods per node and one service."""
    return parse_topology({"clusters": [{"id": "east"}, {"id": "west"}]}, source="<default topology>")


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology YAML file."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise LabInputError(f"{source}: cannot read: {exc.strerror}") from None
    try:
        doc = yaml.load(text, Loader=StrictLoader)  # safe, and refuses duplicate keys
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        reason = getattr(exc, "problem", None) or "invalid YAML"
        raise LabInputError(f"{source}{where}: {reason}") from None
    return parse_topology({} if doc is None else doc, source=source)


def parse_topology(doc: object, *, source: str = "<topology>") -> Topology:
    """Validate a topology document (already parsed YAML) into a Topology."""
    p = _Parser(source)
    # An unknown key's error lists the Globalnet keys only in a Globalnet topology: a plain lab's schema, and its
    # messages, stay what they were before Globalnet (docs/lab.md lists every key).
    flag = doc.get("globalnet") is True if isinstance(doc, Mapping) else False
    hide = frozenset() if flag else gn.GLOBALNET_TOP_KEYS
    if not (isinstance(doc, Mapping) and "egress" in doc):  # listed only in an egress lab's messages, likewise
        hide |= eg.TOP_KEYS
    keys = {"clusters", "multi_active", "strategy", "underlay_mtu", "wan_rate", "globalnet", *eg.TOP_KEYS}
    top = p.mapping(doc, "", keys, hide)
    globalnet = p.boolean(top.get("globalnet", False), "globalnet")
    clusters_doc = p.sequence(top.get("clusters"), "clusters", min_len=1, max_len=MAX_CLUSTERS)
    clusters = tuple(p.cluster(c, f"clusters[{i}]", i, globalnet) for i, c in enumerate(clusters_doc))
    topo = Topology(
        clusters=clusters,
        multi_active=p.boolean(top.get("multi_active", True), "multi_active"),
        strategy=p.strategy(top.get("strategy", "resilient"), "strategy"),
        underlay_mtu=p.integer(top.get("underlay_mtu", 1500), "underlay_mtu", 1280, 9000),
        wan_rate=p.rate(top.get("wan_rate"), "wan_rate"),
        globalnet=globalnet,
        egress=eg.parse_egress(p, top["egress"], clusters) if top.get("egress") is not None else None,
    )
    _check_clusterset(p, topo)
    return topo


class _Parser:
    """Field checks that raise ``LabInputError`` with the source and the field path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, reason: str) -> LabInputError:
        where = f"{path}: " if path else ""
        return LabInputError(f"{self.source}: {where}{reason}")

    def mapping(
        self, value: object, path: str, allowed: set[str], unlisted: frozenset[str] = frozenset()
    ) -> Mapping[str, Any]:
        """``value`` as a mapping of ``allowed`` keys; the error for an unknown key lists them but ``unlisted``."""
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be a mapping, got {type(value).__name__}")
        for key in value:
            if key not in allowed:
                prefix = f"{path}." if path else ""
                listed = ", ".join(sorted(allowed - unlisted))
                raise self.fail(f"{prefix}{key}", f"unknown key (expected one of: {listed})")
        return value

    def sequence(self, value: object, path: str, *, min_len: int, max_len: int) -> list[Any]:
        if value is None and min_len > 0:
            raise self.fail(path, "is required")
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list, got {type(value).__name__}")
        if not min_len <= len(value) <= max_len:
            raise self.fail(path, f"must have {min_len} to {max_len} items, got {len(value)}")
        return value

    def integer(self, value: object, path: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"must be an integer, got {value!r}")
        if not low <= value <= high:
            raise self.fail(path, f"must be from {low} to {high}, got {value}")
        return value

    def boolean(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"must be true or false, got {value!r}")
        return value

    def string(self, value: object, path: str, pattern: re.Pattern[str], what: str) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise self.fail(path, f"{value!r} is not {what}")
        return value

    def strategy(self, value: object, path: str) -> Strategy:
        names = [s.value for s in Strategy]
        if value not in names:
            raise self.fail(path, f"{value!r} is not one of {', '.join(names)}")
        return Strategy(value)

    def rate(self, value: object, path: str) -> str | None:
        if value is None:
            return None
        return self.string(value, path, RATE_RE, "a rate like 50mbit (kbit, mbit or gbit)")

    def cidr(self, value: object, path: str) -> IPv4Network:
        if not isinstance(value, str):
            raise self.fail(path, f"{value!r} is not an IPv4 CIDR")
        try:
            loose = IPv4Network(value, strict=False)
        except ValueError:
            raise self.fail(path, f"{value!r} is not an IPv4 CIDR") from None
        try:
            return IPv4Network(value)
        except ValueError:
            raise self.fail(path, f"{value!r} has host bits set (did you mean {loose}?)") from None

    def cluster(self, value: object, path: str, index: int, globalnet: bool) -> ClusterSpec:
        keys = {"id", "pod_cidr", "service_cidr", "gateways", "workers", "pods_per_node", "services", "pods"}
        hide = frozenset() if globalnet else gn.GLOBALNET_LISTED_CLUSTER_KEYS
        doc = self.mapping(value, path, keys | set(gn.GLOBALNET_CLUSTER_KEYS), hide)
        gn.check_globalnet_keys(self, doc, path, globalnet)
        if "id" not in doc:
            raise self.fail(f"{path}.id", "is required")
        cid = self.string(doc["id"], f"{path}.id", CLUSTER_ID_RE, "a cluster id (a-z then a-z0-9, 1-10 chars)")
        pod_cidr = self.cidr(doc.get("pod_cidr", f"10.{index + 1}.0.0/16"), f"{path}.pod_cidr")
        service_cidr = self.cidr(doc.get("service_cidr", f"100.{index + 1}.0.0/16"), f"{path}.service_cidr")
        spec = ClusterSpec(
            id=cid,
            pod_cidr=pod_cidr,
            service_cidr=service_cidr,
            gateways=self.integer(doc.get("gateways", 2), f"{path}.gateways", 1, MAX_GATEWAYS),
            workers=self.integer(doc.get("workers", 2), f"{path}.workers", 0, MAX_WORKERS),
            pods_per_node=self.integer(doc.get("pods_per_node", 2), f"{path}.pods_per_node", 1, MAX_PODS_PER_NODE),
            services=self.services(doc.get("services", [{"name": "echo"}]), f"{path}.services", globalnet),
        )
        extras: dict[str, Any] = {"pods": gn.pods(self, doc.get("pods", []), f"{path}.pods", spec.node_shorts,
                                                  set(spec.default_pods))}  # fmt: skip
        if globalnet:
            gcidr = doc.get("global_cidr", gn.default_global_cidr(index))
            extras["global_cidr"] = self.cidr(gcidr, f"{path}.global_cidr")
            ips = doc.get("cluster_egress_ips", gn.DEFAULT_CLUSTER_EGRESS_IPS)
            extras["cluster_egress_ips"] = self.integer(ips, f"{path}.cluster_egress_ips", 1, gn.MAX_IPS)
            egress = doc.get("global_egress_ips", [])
            extras["global_egress_ips"] = gn.global_egress_ips(self, egress, f"{path}.global_egress_ips")
        spec = attrs.evolve(spec, **extras)
        self.check_cluster_ranges(spec, path)
        self.check_pods_per_node(spec, path)
        self.check_backends(spec, path)
        return spec

    def services(self, value: object, path: str, globalnet: bool) -> tuple[ServiceSpec, ...]:
        items = self.sequence(value, path, min_len=0, max_len=32)
        out: list[ServiceSpec] = []
        for i, item in enumerate(items):
            spath = f"{path}[{i}]"
            keys = {"name", "port", "backends", "namespace", "selector", "headless", "export"}
            doc = self.mapping(item, spath, keys)
            if "name" not in doc:
                raise self.fail(f"{spath}.name", "is required")
            name = self.string(doc["name"], f"{spath}.name", re.compile(r"^[a-z][a-z0-9-]{0,30}$"), "a service name")
            extras = gn.service_extras(self, doc, spath, globalnet)
            if any((s.namespace, s.name) == (extras["namespace"], name) for s in out):
                what = name if extras["namespace"] == gn.DEFAULT_NAMESPACE else f"{extras['namespace']}/{name}"
                raise self.fail(f"{spath}.name", f"duplicate service {what!r}")
            backends = self.sequence(doc.get("backends", []), f"{spath}.backends", min_len=0, max_len=256)
            for j, b in enumerate(backends):
                if not isinstance(b, str):
                    raise self.fail(f"{spath}.backends[{j}]", f"{b!r} is not a pod name like w1-p1")
            port = self.integer(doc.get("port", DEFAULT_SERVICE_PORT), f"{spath}.port", 1, 65535)
            out.append(ServiceSpec(name=name, port=port, backends=tuple(backends), **extras))
        return tuple(out)

    def check_cluster_ranges(self, spec: ClusterSpec, path: str) -> None:
        nodes = spec.gateways + spec.workers
        if spec.pod_cidr.prefixlen > 24 or 2 ** (24 - spec.pod_cidr.prefixlen) < nodes + 1:
            raise self.fail(f"{path}.pod_cidr", f"{spec.pod_cidr} has fewer than {nodes + 1} /24s (one per node)")
        if spec.service_cidr.num_addresses < 16 + len(spec.services):
            raise self.fail(
                f"{path}.service_cidr", f"{spec.service_cidr} is too small for {len(spec.services)} services"
            )
        for field, net in (("pod_cidr", spec.pod_cidr), ("service_cidr", spec.service_cidr)):
            for what, reserved in RESERVED:
                if net.overlaps(reserved):
                    raise self.fail(f"{path}.{field}", f"{net} overlaps {what} ({reserved})")
        if spec.pod_cidr.overlaps(spec.service_cidr):
            raise self.fail(f"{path}.service_cidr", f"{spec.service_cidr} overlaps pod_cidr {spec.pod_cidr}")

    def check_pods_per_node(self, spec: ClusterSpec, path: str) -> None:
        for i, pod in enumerate(spec.pods):
            on_node = spec.pods_per_node + sum(1 for o in spec.pods[: i + 1] if o.node == pod.node)
            if on_node > MAX_PODS_PER_NODE:
                raise self.fail(f"{path}.pods[{i}].node", f"more than {MAX_PODS_PER_NODE} pods on {pod.node}")

    def check_backends(self, spec: ClusterSpec, path: str) -> None:
        pods = {*spec.default_pods, *(p.name for p in spec.pods)}
        for i, svc in enumerate(spec.services):
            for j, b in enumerate(svc.backends):
                if b not in pods:
                    raise self.fail(f"{path}.services[{i}].backends[{j}]", f"no pod {b!r} in cluster {spec.id}")


def _check_clusterset(p: _Parser, topo: Topology) -> None:
    seen: dict[str, int] = {}
    for i, c in enumerate(topo.clusters):
        if c.id in seen:
            raise p.fail(f"clusters[{i}].id", f"duplicate cluster id {c.id!r} (also clusters[{seen[c.id]}])")
        seen[c.id] = i
    if topo.globalnet:  # clusters may share pod and service CIDRs: their traffic uses the global CIDRs
        gn.check_global_cidrs(p, topo, RESERVED)
        return
    for i, c in enumerate(topo.clusters):
        for j in range(i):
            other = topo.clusters[j]
            for field, net in (("pod_cidr", c.pod_cidr), ("service_cidr", c.service_cidr)):
                for onet in (other.pod_cidr, other.service_cidr):
                    if net.overlaps(onet):
                        raise p.fail(f"clusters[{i}].{field}", f"{net} overlaps {onet} of cluster {other.id}")
