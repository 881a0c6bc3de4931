"""The file broker's documents: one YAML mapping each, ``{kind: Cluster|Config|Node|Endpoint|Health, ...}``.

This module reads a file into documents and checks each one's shape (a mapping,
a known kind, its identity fields, the keys a Config or Health may have). The
fields themselves are validated by ``magw.snapshot.load.parse_snapshot`` when the
documents are assembled into a snapshot (``magw.sources.file.assemble``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

import attrs
import yaml

from magw.snapshot.yamlstrict import FastStrictLoader, StrictLoader

# Globalnet kinds (docs/globalnet.md): objects of one cluster, assembled into Snapshot.globalnet of that cluster.
# Their fields are those of the snapshot's globalnet section (magw.snapshot.globalnet) plus ``cluster``.
GLOBALNET_SECTIONS: dict[str, str] = {
    "Namespace": "namespaces",
    "Pod": "pods",
    "Service": "services",
    "ServiceExport": "service_exports",
    "ClusterGlobalEgressIP": "cluster_global_egress_ips",
    "GlobalEgressIP": "global_egress_ips",
    "GlobalIngressIP": "global_ingress_ips",
    "GlobalnetStatus": "statuses",
}
# Egress gateway kinds (docs/egress-gateway.md): objects of one cluster, assembled into its Snapshot.egressgw.
# Their fields are those of the snapshot's egress section (magw.snapshot.egressgw) plus ``cluster``.
EGRESSGW_SECTIONS: dict[str, str] = {"EgressConfig": "config", "EgressVIP": "vips", "EgressVIPStatus": "statuses"}
# A Lease document (magw.sources.file.lease) lives in the directory too; it is not part of any snapshot.
KINDS: tuple[str, ...] = (
    "Cluster",
    "Config",
    "Node",
    "Endpoint",
    "Health",
    *GLOBALNET_SECTIONS,
    *EGRESSGW_SECTIONS,
    "Lease",
)

# What each kind adds to the snapshot (magw.snapshot.load's top-level keys); Config and Health are singletons.
CONFIG_KEYS: tuple[str, ...] = (
    "multi_active_gateway",
    "strategy",
    "underlay_mtu",
    "resilient",
    "cni",
    "cable",
    "wireguard_port",
    "keep_client_ip",
)
HEALTH_KEYS: tuple[str, ...] = ("down", "reach")

# Fields only the broker and the daemons read; they are stripped before the snapshot is parsed.
NODE_EXTRA_KEYS: tuple[str, ...] = ("public_ip", "public_port")

_IDENTITY: dict[str, tuple[str, ...]] = {
    "Cluster": ("id",),
    "Config": (),
    "Node": ("cluster", "name"),
    "Endpoint": ("cluster", "hostname"),
    "Health": (),
    "Namespace": ("cluster", "name"),
    "Pod": ("cluster", "namespace", "name"),
    "Service": ("cluster", "namespace", "name"),
    "ServiceExport": ("cluster", "namespace", "name"),
    "ClusterGlobalEgressIP": ("cluster", "name"),
    "GlobalEgressIP": ("cluster", "namespace", "name"),
    "GlobalIngressIP": ("cluster", "namespace", "name"),
    "GlobalnetStatus": ("cluster",),  # + the kind, namespace and name of its ``object``: see _identity
    "EgressConfig": ("cluster",),
    "EgressVIP": ("cluster", "name"),
    "EgressVIPStatus": ("cluster", "name"),
    "Lease": ("name",),
}

NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


class DocumentError(ValueError):
    """A document (or file) that cannot be used; ``str()`` is one line naming the file and the reason."""


@attrs.frozen(kw_only=True, eq=True)
class Document:
    """One document of one file. ``ident`` names it across files: ``("Node", "east", "e-w1")``."""

    file: str
    index: int
    kind: str
    ident: tuple[str, ...]
    fields: Mapping[str, Any] = attrs.field(hash=False)

    @property
    def where(self) -> str:
        """``node-e-w1.yaml: document 1 (Node east/e-w1)``."""
        name = "/".join(self.ident[1:])
        if not name.isprintable():  # a name with a newline would break the one-line error (found by fuzzing)
            name = name.encode("unicode_escape").decode("ascii")
        what = f"{self.kind} {name}" if name else self.kind
        return f"{self.file}: document {self.index + 1} ({what})"

    def same_content(self, other: Document) -> bool:
        return self.kind == other.kind and self.ident == other.ident and dict(self.fields) == dict(other.fields)


def _identity(kind: str, raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    parts = [kind]
    for key in _IDENTITY[kind]:
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise DocumentError(f"{where}: {key}: required, a non-empty string")
        parts.append(value)
    if kind == "GlobalnetStatus":
        obj = raw.get("object")
        if not isinstance(obj, Mapping) or not isinstance(obj.get("kind"), str) or not isinstance(obj.get("name"), str):
            raise DocumentError(f"{where}: object: required, a mapping with kind, namespace and name")
        namespace = obj.get("namespace") or ""
        parts.extend((obj["kind"], namespace if isinstance(namespace, str) else "", obj["name"]))
    return tuple(parts)


def _check_keys(kind: str, raw: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in allowed:
            known = ", ".join(allowed)
            raise DocumentError(f"{where}: {key!r} is not a {kind} field (known: {known})")


def _check_node_extras(raw: Mapping[str, Any], where: str) -> None:
    port = raw.get("public_port")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535):
        raise DocumentError(f"{where}: public_port: {port!r} is not a port (1..65535)")
    public_ip = raw.get("public_ip")
    if public_ip is None:
        return
    try:
        ipaddress.IPv4Address(public_ip)
    except ValueError:
        raise DocumentError(f"{where}: public_ip: {public_ip!r} is not an IPv4 address") from None


def to_document(raw: object, *, file: str, index: int) -> Document:
    """Check one loaded YAML document's shape and name it."""
    where = f"{file}: document {index + 1}"
    if not isinstance(raw, Mapping):
        raise DocumentError(f"{where}: expected a mapping with a 'kind' key, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise DocumentError(f"{where}: kind: {kind!r} is not one of {', '.join(KINDS)}")
    fields = {str(k): v for k, v in raw.items() if k != "kind"}
    if kind == "Config":
        _check_keys(kind, fields, CONFIG_KEYS, where)
    elif kind == "Health":
        _check_keys(kind, fields, HEALTH_KEYS, where)
    elif kind == "Node":
        _check_node_extras(fields, where)
    return Document(file=file, index=index, kind=kind, ident=_identity(kind, fields, where), fields=fields)


def parse_file(text: str, *, file: str) -> tuple[Document, ...]:
    """All documents of one file (``---``-separated); empty documents are ignored."""
    try:
        loaded = _load_all(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        reason = " ".join(str(exc.problem or "invalid YAML").split())
        raise DocumentError(f"{file}{line}: {reason}") from None
    except yaml.YAMLError as exc:
        raise DocumentError(f"{file}: {' '.join(str(exc).split())}") from None
    docs = [to_document(raw, file=file, index=i) for i, raw in enumerate(loaded) if raw is not None]
    return tuple(docs)


def _load_all(text: str) -> list[Any]:
    """Every document of ``text``: libyaml's parser when present (``magw.snapshot.yamlstrict``), safe and refusing
    duplicate keys; a text it refuses is read again by the Python loader, so errors read the same either way."""
    try:
        return list(yaml.load_all(text, Loader=FastStrictLoader))
    except yaml.YAMLError:
        if FastStrictLoader is StrictLoader:
            raise
    return list(yaml.load_all(text, Loader=StrictLoader))


def check_name(value: str, what: str) -> str:
    """A cluster or host name usable in a file name."""
    if not NAME_RE.match(value):
        raise ValueError(f"{what}: {value!r} must be letters, digits, '.', '_' or '-' (and start/end alnum)")
    return value
