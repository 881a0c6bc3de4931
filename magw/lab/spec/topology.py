"""The lab's topology: schema, YAML loader and validation.

A topology says how many clusters, gateways, workers and pods to build, and a
few clusterset settings. Addresses are not part of it: ``magw.lab.spec.layout``
derives them. Every error is one line: ``<source>: <field path>: <reason>``.
The schema is documented in docs/lab.md.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import attrs
import yaml

from magw.lab.errors import LabInputError
from magw.lab.spec import egressgw as eg
from magw.lab.spec import globalnet as gn
from magw.lab.spec.cloud import LoadBalancerSpec, parse_load_balancer
from magw.lab.spec.cluster import (
    DEFAULT_CLUSTER_EGRESS_IPS,
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE_PORT,
    ClusterSpec,
    ServiceSpec,
)
from magw.lab.spec.egressgw import EgressGatewayLabSpec, egressgw_doc
from magw.lab.spec.naming import CLUSTER_ID_RE
from magw.lab.spec.parser import Parser
from magw.lab.spec.probe import ProbeSpec, parse_probe
from magw.model import Strategy
from magw.model.cable import Cable
from magw.snapshot.yamlstrict import StrictLoader

MAX_CLUSTERS = 8
MAX_GATEWAYS = 8
MAX_WORKERS = 32
MAX_PODS_PER_NODE = 16

# The keys each level of a topology accepts: what the parser reads, and what an unknown key's error lists (all
# of them, in every lab: a plain lab's error names ``globalnet``, ``egress`` and ``pods`` too).
TOP_KEYS = frozenset(
    {"clusters", "multi_active", "strategy", "underlay_mtu", "wan_rate", "cable", "probe", "keep_client_ip",
     "load_balancer"}
    | gn.TOP_KEYS
    | eg.TOP_KEYS
)
CLUSTER_KEYS = frozenset(
    {"id", "pod_cidr", "service_cidr", "gateways", "workers", "pods_per_node", "services", "added_gateways",
     *gn.CLUSTER_KEYS}
)
SERVICE_KEYS = frozenset({"name", "port", "backends", *gn.SERVICE_KEYS})

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
class Topology:
    clusters: tuple[ClusterSpec, ...]
    multi_active: bool = True
    strategy: Strategy = Strategy.RESILIENT
    underlay_mtu: int = 1500
    wan_rate: str | None = None
    globalnet: bool = False
    egressgw: EgressGatewayLabSpec | None = None  # the egress gateway's VIPs (magw.lab.spec.egressgw)
    cable: Cable = Cable.VXLAN  # between gateways: plain VXLAN, or VXLAN through WireGuard (docs/cables.md)
    probe: ProbeSpec | None = None  # the route agents' probe tunables (magw.lab.spec.probe)
    # Config.keep_client_ip: a remote client's service connection keeps its address (docs/client-ip.md). On in
    # the lab; ``false`` for daemons of a build that does not know it (magw lab up --daemons-from an old tree).
    keep_client_ip: bool = True
    # A cloud load balancer and NAT gateway in front of each cluster's gateways (magw.lab.spec.cloud)
    load_balancer: LoadBalancerSpec | None = None

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
                    **({"added_gateways": c.added_gateways} if c.added_gateways else {}),
                }
                for c in self.clusters
            ],
        }
        if self.cable is not Cable.VXLAN:
            doc["cable"] = self.cable.value
        if self.probe is not None:
            doc["probe"] = self.probe.to_doc()
        if not self.keep_client_ip:
            doc["keep_client_ip"] = False
        if self.load_balancer is not None:
            doc["load_balancer"] = self.load_balancer.to_doc()
        if self.globalnet:
            doc["globalnet"] = True
        if self.egressgw is not None:
            doc["egress"] = egressgw_doc(self.egressgw)
        return doc


def default_topology() -> Topology:
    """Two clusters (east, west), each with 2 gateways, 2 workers, 2 pods per node and one service."""
    return parse_topology({"clusters": [{"id": "east"}, {"id": "west"}]}, source="<default topology>")


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology YAML file."""
    source = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise LabInputError(f"{source}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise LabInputError(f"{source}: cannot read: {exc}") from None
    return parse_topology_text(text, source=source)


def parse_topology_text(text: str, *, source: str = "<topology>") -> Topology:
    """Validate a topology's YAML text; every error is one ``LabInputError`` line naming ``source``."""
    try:
        doc = yaml.load(text, Loader=StrictLoader)  # safe, and refuses duplicate keys
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        reason = getattr(exc, "problem", None) or "invalid YAML"
        raise LabInputError(f"{source}{where}: {' '.join(str(reason).split())}") from None
    return parse_topology({} if doc is None else doc, source=source)


def parse_topology(doc: object, *, source: str = "<topology>") -> Topology:
    """Validate a topology document (already parsed YAML) into a Topology."""
    p = _Parser(source)
    top = p.mapping(doc, "", TOP_KEYS)
    globalnet = p.boolean(top.get("globalnet", False), "globalnet")
    clusters_doc = p.sequence(top.get("clusters"), "clusters", min_len=1, max_len=MAX_CLUSTERS)
    clusters = tuple(p.cluster(c, f"clusters[{i}]", i, globalnet) for i, c in enumerate(clusters_doc))
    topo = Topology(
        clusters=clusters,
        multi_active=p.boolean(top.get("multi_active", True), "multi_active"),
        strategy=p.strategy(top.get("strategy", "resilient"), "strategy"),
        underlay_mtu=p.integer(top.get("underlay_mtu", 1500), "underlay_mtu", 1280, 9000),
        wan_rate=p.rate(top.get("wan_rate"), "wan_rate"),
        cable=p.cable(top.get("cable", "vxlan"), "cable"),
        globalnet=globalnet,
        egressgw=eg.parse_egressgw(p, top["egress"], clusters) if top.get("egress") is not None else None,
        probe=parse_probe(p, top["probe"]) if top.get("probe") is not None else None,
        keep_client_ip=p.boolean(top.get("keep_client_ip", True), "keep_client_ip"),
        load_balancer=parse_load_balancer(p, top.get("load_balancer")),
    )
    if topo.load_balancer is not None and topo.wan_rate is not None:
        raise p.fail("wan_rate", "shapes each gateway's own WAN link, which gateways behind load_balancer have not")
    _check_clusterset(p, topo)
    return topo


class _Parser(Parser):
    """The generic field checks (``magw.lab.spec.parser``) and those of a cluster and its services."""

    def cluster(self, value: object, path: str, index: int, globalnet: bool) -> ClusterSpec:
        doc = self.mapping(value, path, CLUSTER_KEYS)
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
        spec = attrs.evolve(spec, added_gateways=self.integer(
            doc.get("added_gateways", 0), f"{path}.added_gateways", 0, MAX_GATEWAYS - spec.gateways))  # fmt: skip
        extras: dict[str, Any] = {"pods": gn.pods(self, doc.get("pods", []), f"{path}.pods", spec.node_shorts,
                                                  set(spec.default_pods))}  # fmt: skip
        if globalnet:
            gcidr = doc.get("global_cidr", gn.default_global_cidr(index))
            extras["global_cidr"] = self.cidr(gcidr, f"{path}.global_cidr")
            ips = doc.get("cluster_egress_ips", DEFAULT_CLUSTER_EGRESS_IPS)
            extras["cluster_egress_ips"] = self.integer(ips, f"{path}.cluster_egress_ips", 1, gn.MAX_IPS)
            global_egress = doc.get("global_egress_ips", [])
            extras["global_egress_ips"] = gn.global_egress_ips(self, global_egress, f"{path}.global_egress_ips")
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
            doc = self.mapping(item, spath, SERVICE_KEYS)
            if "name" not in doc:
                raise self.fail(f"{spath}.name", "is required")
            name = self.string(doc["name"], f"{spath}.name", re.compile(r"^[a-z][a-z0-9-]{0,30}$"), "a service name")
            extras = gn.service_extras(self, doc, spath, globalnet)
            if any((s.namespace, s.name) == (extras["namespace"], name) for s in out):
                what = name if extras["namespace"] == DEFAULT_NAMESPACE else f"{extras['namespace']}/{name}"
                raise self.fail(f"{spath}.name", f"duplicate service {what!r}")
            backends = self.sequence(doc.get("backends", []), f"{spath}.backends", min_len=0, max_len=256)
            for j, b in enumerate(backends):
                if not isinstance(b, str):
                    raise self.fail(f"{spath}.backends[{j}]", f"{b!r} is not a pod name like w1-p1")
            port = self.integer(doc.get("port", DEFAULT_SERVICE_PORT), f"{spath}.port", 1, 65535)
            out.append(ServiceSpec(name=name, port=port, backends=tuple(backends), **extras))
        return tuple(out)

    def check_cluster_ranges(self, spec: ClusterSpec, path: str) -> None:
        nodes = spec.gateways + spec.workers + spec.added_gateways
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
        gn.check_global_cidrs(p, topo.clusters, RESERVED)
        return
    for i, c in enumerate(topo.clusters):
        for j in range(i):
            other = topo.clusters[j]
            for field, net in (("pod_cidr", c.pod_cidr), ("service_cidr", c.service_cidr)):
                for onet in (other.pod_cidr, other.service_cidr):
                    if net.overlaps(onet):
                        raise p.fail(f"clusters[{i}].{field}", f"{net} overlaps {onet} of cluster {other.id}")
