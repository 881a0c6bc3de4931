"""The snapshot (file broker) format: YAML -> ``magw.model.Snapshot``, validated.

A snapshot names the local cluster, its nodes, and the gateways (endpoints) of
every cluster of the clusterset; ``docs/snapshot-format.md`` describes every field.
Anything wrong raises ``SnapshotError`` whose text is one line naming the file,
the field path and the reason::

    snapshot.yaml: clusters[1].pod_cidrs[0]: '10.2.0.0/33' is not an IPv4 CIDR

Parsing is in two steps: each field is read and typed where it stands
(``magw.snapshot.fields``), then the relations between items are checked
(``magw.snapshot.checks``: references, duplicates, overlaps, VTEP collisions).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Protocol, TypeVar

import attrs
import yaml

from magw.model import Cluster, Cni, Config, Endpoint, Health, Node, ResilientParams, Snapshot, Strategy
from magw.model.cable import NAT_SOURCE_FIELD, PUBLIC_KEY_FIELD, PUBLIC_PORT_FIELD, Cable, check_public_key
from magw.model.egressgw import EgressGateway
from magw.model.globalnet import Globalnet
from magw.snapshot.checks import (
    HealthRefs,
    OverlapCheck,
    ParsedCluster,
    ParsedEndpoint,
    SubnetCheck,
    check_relations,
    located,
)
from magw.snapshot.dump import globalnet_to_doc
from magw.snapshot.egressgw import egressgw_to_doc, parse_egressgw
from magw.snapshot.fields import (
    FieldError,
    Fields,
    boolean,
    cidr_list,
    integer,
    ipv4,
    item_path,
    sequence,
    string,
    string_list,
)
from magw.snapshot.globalnet import parse_globalnet
from magw.snapshot.yamlstrict import load_strict
from magw.util.gcpause import gc_paused

_TOP_KEYS = (
    "local_cluster",
    "multi_active_gateway",
    "strategy",
    "underlay_mtu",
    "resilient",
    "cni",
    "cable",
    "wireguard_port",
    "keep_client_ip",
    "clusters",
    "nodes",
    "endpoints",
    "health",
    "globalnet",
    "egress",
)
_T = TypeVar("_T")
_E = TypeVar("_E", bound=enum.Enum)
_MTU_MIN, _MTU_MAX = 576, 9216
# Limits of resilient groups: NHA_RES_GROUP_BUCKETS is a u16 (0 is refused). The timers travel as u32
# clock_t, but the kernel caps large values depending on HZ (kernel 6.18: idle_timer 42949671 s reads back
# as 8589934 s), and a value that reads back different would make every sync replace the group. 10**6 s
# (11.5 days) is kept exactly.
_BUCKETS_MAX = 0xFFFF
_TIMER_MAX = 1_000_000
_RESILIENT_RANGES = {"buckets": (1, _BUCKETS_MAX), "idle_timer": (0, _TIMER_MAX), "unbalanced_timer": (0, _TIMER_MAX)}


class ParseCache(Protocol):
    """What ``parse_snapshot`` may reuse from earlier parses (``magw.snapshot.cache.SnapshotParser``).

    ``item`` returns ``parse(value, path)`` or the result of an earlier call for an equal item of the same
    section, possibly parsed at another path (the caller puts it at ``path``); ``check_overlaps`` and
    ``check_subnets`` give the verdicts and errors of ``check_overlaps`` and ``SubnetChecker``.
    """

    def item(self, section: str, value: object, path: str, parse: Callable[[object, str], _T]) -> _T: ...

    @property
    def check_overlaps(self) -> OverlapCheck: ...

    @property
    def check_subnets(self) -> SubnetCheck: ...


class SnapshotError(ValueError):
    """A snapshot that cannot be used. ``str()`` is one line: ``file[:line]: field.path: reason``."""

    def __init__(self, *, source: str, path: str, reason: str, line: int | None = None) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {path}: {reason}" if path else f"{where}: {reason}")
        self.source = source
        self.path = path
        self.reason = reason
        self.line = line


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read and validate the snapshot file at ``path``."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SnapshotError(source=source, path="", reason=f"cannot read: {reason}") from None
    return parse_snapshot_text(text, source=source)


def parse_snapshot_text(text: str, *, source: str = "<snapshot>") -> Snapshot:
    """Parse YAML text; syntax errors become ``source:line: reason``."""
    with gc_paused():  # magw.util.gcpause: about a quarter of the load time at 100k CIDRs
        try:
            doc = load_strict(text)  # SafeLoader rules (no arbitrary objects), libyaml's parser when present
        except yaml.MarkedYAMLError as exc:
            raise _yaml_error(exc, source) from None
        except yaml.YAMLError as exc:
            raise SnapshotError(source=source, path="", reason=" ".join(str(exc).split())) from None
        return parse_snapshot(doc, source=source)


def parse_snapshot(doc: object, *, source: str = "<snapshot>", cache: ParseCache | None = None) -> Snapshot:
    """Build a Snapshot from an already-loaded document (dicts, lists, scalars).

    With ``cache`` the parsed clusters of earlier calls are reused and the overlap check skips what it
    already passed; the result and every error are the same as without it.
    """
    try:
        return _snapshot(doc, cache)
    except FieldError as exc:
        raise SnapshotError(source=source, path=exc.path, reason=exc.reason) from None


def _yaml_error(exc: yaml.MarkedYAMLError, source: str) -> SnapshotError:
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    reason = exc.problem or "invalid YAML"
    if exc.context:
        reason = f"{reason} ({exc.context})"
    return SnapshotError(source=source, path="", reason=" ".join(reason.split()), line=line)


def _snapshot(doc: object, cache: ParseCache | None) -> Snapshot:
    if doc is None:
        raise FieldError("", "the document is empty, expected a mapping")
    top = Fields(doc, "", _TOP_KEYS)
    local = string(top.required("local_cluster"), top.at("local_cluster"))
    if cache is None:
        clusters = _items(top, "clusters", _cluster, required=True)
        nodes = _items(top, "nodes", _node, required=False)
        endpoints = _items(top, "endpoints", _endpoint, required=False)
    else:  # what an earlier parse read from an equal item, put at this item's path
        clusters = _items(top, "clusters", lambda v, p: cache.item("clusters", v, p, _cluster).at(p), required=True)
        nodes = _items(top, "nodes", lambda v, p: cache.item("nodes", v, p, _node), required=False)
        endpoints = _items(
            top, "endpoints", lambda v, p: cache.item("endpoints", v, p, _endpoint).at(p), required=False
        )
    config = _config(top)
    health, refs = _health(top)
    globalnet = (
        parse_globalnet(top.optional("globalnet"), top.at("globalnet"), cache=cache)
        if top.has("globalnet")
        else Globalnet()
    )
    egress = parse_egressgw(top.optional("egress"), top.at("egress")) if top.has("egress") else EgressGateway()
    check_relations(
        local_cluster=local,
        clusters=clusters,
        nodes=nodes,
        endpoints=endpoints,
        health=refs,
        overlaps=None if cache is None else cache.check_overlaps,
        subnets=None if cache is None else cache.check_subnets,
    )
    checked = tuple(c.cluster for c in clusters)  # check_relations passed: their CIDRs overlap nothing
    return Snapshot(
        local_cluster=local,
        clusters=checked,
        overlaps_checked=checked,
        nodes=nodes,
        endpoints=[e.endpoint for e in endpoints],
        config=config,
        health=health,
        globalnet=globalnet,
        egressgw=egress,
    )


def _items(top: Fields, key: str, parse: Callable[[object, str], _T], *, required: bool) -> list[_T]:
    raw = top.required(key) if required else top.optional(key)
    if raw is None and not required:
        return []
    path = top.at(key)
    return [parse(item, item_path(path, i)) for i, item in enumerate(sequence(raw, path))]


def _cluster(value: object, path: str) -> ParsedCluster:
    f = Fields(value, path, ("id", "pod_cidrs", "service_cidrs", "global_cidrs"))
    cid = string(f.required("id"), f.at("id"))
    pods = cidr_list(f.required("pod_cidrs"), f.at("pod_cidrs"))
    services = cidr_list(f.required("service_cidrs"), f.at("service_cidrs"))
    globals_ = cidr_list(f.optional("global_cidrs"), f.at("global_cidrs")) if f.has("global_cidrs") else []
    ranges = (  # paths inside the item: see Located
        *located(pods, "pod_cidrs"),
        *located(services, "service_cidrs"),
        *located(globals_, "global_cidrs"),
    )
    return ParsedCluster(
        cluster=Cluster(id=cid, pod_cidrs=pods, service_cidrs=services, global_cidrs=globals_),
        ranges=ranges,
        path=path,
    )


def _node(value: object, path: str) -> Node:
    f = Fields(value, path, ("name", "ip", "cni_ip", "gateway", "pod_cidrs"))
    return Node(
        name=string(f.required("name"), f.at("name")),
        ip=ipv4(f.required("ip"), f.at("ip")),
        cni_ip=ipv4(f.required("cni_ip"), f.at("cni_ip")),
        gateway=boolean(f.optional("gateway"), f.at("gateway")) if f.has("gateway") else False,
        pod_cidrs=cidr_list(f.optional("pod_cidrs"), f.at("pod_cidrs")) if f.has("pod_cidrs") else (),
    )


def _endpoint(value: object, path: str) -> ParsedEndpoint:
    f = Fields(
        value,
        path,
        ("cluster", "hostname", "private_ip", "public_ip", "subnets", "allocated_ips", "backend", "backend_config"),
    )
    cluster = string(f.required("cluster"), f.at("cluster"))
    hostname = string(f.required("hostname"), f.at("hostname"))
    private_ip = ipv4(f.required("private_ip"), f.at("private_ip"))
    public_ip = ipv4(f.optional("public_ip"), f.at("public_ip")) if f.has("public_ip") else None
    subnets = cidr_list(f.optional("subnets"), f.at("subnets")) if f.has("subnets") else []
    allocated = f.optional("allocated_ips") or []
    allocated_ips = [
        ipv4(a, item_path(f.at("allocated_ips"), i)) for i, a in enumerate(sequence(allocated, f.at("allocated_ips")))
    ]
    backend = _enum(Cable, "backend", f.optional("backend"), f.at("backend")) if f.has("backend") else Cable.VXLAN
    # backend_config, opened once for its three keys of ours (None when absent)
    config = None
    if f.has("backend_config"):
        config = Fields(f.optional("backend_config"), f.at("backend_config"), allowed=None)
    public_key = _public_key(config, backend, f.at("backend_config"))
    public_port = _public_port(config)
    nat_source_ip = _nat_source_ip(config)
    endpoint = Endpoint(
        cluster=cluster,
        hostname=hostname,
        private_ip=private_ip,
        public_ip=public_ip,
        subnets=subnets,
        allocated_ips=allocated_ips,
        backend=backend,
        public_key=public_key,
        public_port=public_port,
        nat_source_ip=nat_source_ip,
    )
    return ParsedEndpoint(endpoint=endpoint, subnets=located(subnets, "subnets"), path=path)


def _public_key(config: Fields | None, backend: Cable, path: str) -> str | None:
    """``backend_config.publicKey``: required with ``backend: wireguard``, a WireGuard public key. Other keys of
    ``backend_config`` (Submariner puts NAT discovery ports there) are kept out of the model, not refused."""
    if config is None:
        if backend is Cable.WIREGUARD:
            raise FieldError(path, f"backend wireguard needs backend_config.{PUBLIC_KEY_FIELD}")
        return None
    if not config.has(PUBLIC_KEY_FIELD):
        if backend is Cable.WIREGUARD:
            raise FieldError(config.at(PUBLIC_KEY_FIELD), "backend wireguard needs a WireGuard public key")
        return None
    key = string(config.optional(PUBLIC_KEY_FIELD), config.at(PUBLIC_KEY_FIELD))
    problem = check_public_key(key)
    if problem is not None:
        raise FieldError(config.at(PUBLIC_KEY_FIELD), problem)
    return key


def _public_port(config: Fields | None) -> int | None:
    """``backend_config.publicPort``: the port the cable is reached at on the public IP, 1..65535, given as a
    string (Submariner's backend_config is a map of strings) or an integer."""
    if config is None or not config.has(PUBLIC_PORT_FIELD):
        return None
    raw, path = config.optional(PUBLIC_PORT_FIELD), config.at(PUBLIC_PORT_FIELD)
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and not raw.startswith("0"):
        raw = int(raw)
    return integer(raw, path, low=1, high=65535)


def _nat_source_ip(config: Fields | None) -> IPv4Address | None:
    """``backend_config.natSourceIP``: the address another NAT gives this gateway's cable packets (an IPv4 string)."""
    if config is None or not config.has(NAT_SOURCE_FIELD):
        return None
    return ipv4(config.optional(NAT_SOURCE_FIELD), config.at(NAT_SOURCE_FIELD))


def _enum(kind: type[_E], what: str, value: object, path: str) -> _E:
    name = string(value, path)
    try:
        return kind(name)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in kind)
        raise FieldError(path, f"unknown {what} {name!r} (expected one of: {allowed})") from None


def _config(top: Fields) -> Config:
    default = Config()
    multi = default.multi_active
    if top.has("multi_active_gateway"):
        multi = boolean(top.optional("multi_active_gateway"), top.at("multi_active_gateway"))
    strategy = default.strategy
    if top.has("strategy"):
        strategy = _strategy(top.optional("strategy"), top.at("strategy"))
    mtu = default.underlay_mtu
    if top.has("underlay_mtu"):
        mtu = integer(top.optional("underlay_mtu"), top.at("underlay_mtu"), low=_MTU_MIN, high=_MTU_MAX)
    resilient = default.resilient
    if top.has("resilient"):
        resilient = _resilient(top.optional("resilient"), top.at("resilient"))
    cni = default.cni
    if top.has("cni"):
        cni = _cni(top.optional("cni"), top.at("cni"))
    cable = _enum(Cable, "cable", top.optional("cable"), top.at("cable")) if top.has("cable") else default.cable
    port = default.wireguard_port
    if top.has("wireguard_port"):
        port = integer(top.optional("wireguard_port"), top.at("wireguard_port"), low=1, high=65535)
    keep = default.keep_client_ip
    if top.has("keep_client_ip"):
        keep = boolean(top.optional("keep_client_ip"), top.at("keep_client_ip"))
    return Config(
        multi_active=multi,
        strategy=strategy,
        underlay_mtu=mtu,
        resilient=resilient,
        cni=cni,
        cable=cable,
        wireguard_port=port,
        keep_client_ip=keep,
    )


def _cni(value: object, path: str) -> Cni:
    return _enum(Cni, "cni", value, path)


def _strategy(value: object, path: str) -> Strategy:
    return _enum(Strategy, "strategy", value, path)


def _resilient(value: object, path: str) -> ResilientParams:
    f = Fields(value, path, _RESILIENT_RANGES)
    defaults = attrs.asdict(ResilientParams())
    values = {
        name: integer(f.optional(name), f.at(name), low=low, high=high) if f.has(name) else defaults[name]
        for name, (low, high) in _RESILIENT_RANGES.items()
    }
    return ResilientParams(**values)


def _health(top: Fields) -> tuple[Health, HealthRefs]:
    if not top.has("health"):
        return Health(), HealthRefs()
    f = Fields(top.optional("health"), top.at("health"), ("down", "reach"))
    down = string_list(f.optional("down"), f.at("down")) if f.has("down") else []
    reach: list[tuple[str, list[str]]] = []
    if f.has("reach"):
        reach_fields = Fields(f.optional("reach"), f.at("reach"), allowed=None)
        for gw in reach_fields.names():
            reach.append((gw, string_list(reach_fields.required(gw), reach_fields.at(gw))))
    refs = HealthRefs(down=tuple(down), reach=tuple((gw, tuple(cids)) for gw, cids in reach))
    return Health(down=frozenset(down), reach=reach), refs


def snapshot_to_doc(snapshot: Snapshot) -> dict[str, object]:
    """The document form of a snapshot: ``parse_snapshot(snapshot_to_doc(s)) == s`` for a valid ``s``.

    Optional fields are left out when they hold their default (no public IP, no
    subnets, no global CIDRs, healthy everywhere).
    """
    config = snapshot.config
    doc: dict[str, object] = {
        "local_cluster": snapshot.local_cluster,
        "multi_active_gateway": config.multi_active,
        "strategy": config.strategy.value,
        "underlay_mtu": config.underlay_mtu,
        "resilient": attrs.asdict(config.resilient),
        **({"cni": config.cni.value} if config.cni is not Cni.GENERIC else {}),  # the default stays out: old dumps
        **({"cable": config.cable.value} if config.cable is not Cable.VXLAN else {}),
        **({"wireguard_port": config.wireguard_port} if config.wireguard_port != Config().wireguard_port else {}),
        **({"keep_client_ip": True} if config.keep_client_ip else {}),  # old builds refuse keys they do not know
        "clusters": [_cluster_doc(c) for c in snapshot.clusters],
        "nodes": [_node_doc(n) for n in snapshot.nodes],
        "endpoints": [endpoint_doc(e) for e in snapshot.endpoints],
    }
    health = snapshot.health
    if health.down or health.reach:
        doc["health"] = {
            "down": sorted(health.down),
            "reach": {gw: sorted(clusters) for gw, clusters in health.reach},
        }
    if not snapshot.globalnet.empty:
        doc["globalnet"] = globalnet_to_doc(snapshot.globalnet)
    if snapshot.egressgw != EgressGateway():
        doc["egress"] = egressgw_to_doc(snapshot.egressgw)
    return doc


def dump_snapshot(snapshot: Snapshot) -> str:
    """The snapshot as YAML text that ``parse_snapshot_text`` reads back to an equal value."""
    return yaml.safe_dump(snapshot_to_doc(snapshot), sort_keys=False)


def _node_doc(node: Node) -> dict[str, object]:
    doc: dict[str, object] = {"name": node.name, "ip": str(node.ip), "cni_ip": str(node.cni_ip)}
    doc["gateway"] = node.gateway
    if node.pod_cidrs:
        doc["pod_cidrs"] = [str(n) for n in node.pod_cidrs]
    return doc


def _cluster_doc(cluster: Cluster) -> dict[str, object]:
    doc: dict[str, object] = {
        "id": cluster.id,
        "pod_cidrs": [str(n) for n in cluster.pod_cidrs],
        "service_cidrs": [str(n) for n in cluster.service_cidrs],
    }
    if cluster.global_cidrs:
        doc["global_cidrs"] = [str(n) for n in cluster.global_cidrs]
    return doc


def endpoint_doc(endpoint: Endpoint) -> dict[str, object]:
    """An endpoint as a snapshot item (also the body of a broker's Endpoint document)."""
    doc: dict[str, object] = {
        "cluster": endpoint.cluster,
        "hostname": endpoint.hostname,
        "private_ip": str(endpoint.private_ip),
    }
    if endpoint.public_ip is not None:
        doc["public_ip"] = str(endpoint.public_ip)
    if endpoint.subnets:
        doc["subnets"] = [str(n) for n in endpoint.subnets]
    if endpoint.allocated_ips:
        doc["allocated_ips"] = [str(a) for a in endpoint.allocated_ips]
    if endpoint.backend is not Cable.VXLAN:
        doc["backend"] = endpoint.backend.value
    config: dict[str, str] = {}
    if endpoint.public_key is not None:
        config[PUBLIC_KEY_FIELD] = endpoint.public_key
    if endpoint.public_port is not None:
        config[PUBLIC_PORT_FIELD] = str(endpoint.public_port)
    if endpoint.nat_source_ip is not None:
        config[NAT_SOURCE_FIELD] = str(endpoint.nat_source_ip)
    if config:
        doc["backend_config"] = config
    return doc
