"""The egress gateway part of the snapshot and of the file broker: YAML values <-> ``magw.model.egressgw``. Pure.

The same item shapes serve the snapshot's ``egress:`` section and the broker's documents (one object per
document, plus ``kind`` and ``cluster``): ``EgressConfig`` (one per cluster), ``EgressVIP`` and
``EgressVIPStatus`` (one per VIP, written by the controller). Field names are those of the EgressVIP CRD
(``deploy/crds/submariner.io_egressvips.yaml``), camelCase, so a CR and a document read the same.
``docs/egress-gateway.md`` lists every field.

What is refused (``FieldError``: path + one-line reason): a bad address or CIDR, a vrid out of 1..255, an
``advertInt`` out of 0.01..40.95 s or finer than a centisecond (VRRPv3 carries centiseconds), a VIP without
candidates, a candidate or binding listed twice, two VIPs with the same name, vrid or address, a VIP outside
every ``vipRanges`` CIDR (no ranges: every VIP is outside), and any unknown field. Two VIPs claiming the same
namespace or Service are not refused here: the resolver reports that (``magw.desired.egressgw.bindings``),
and the controller's API refuses to create it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from ipaddress import IPv4Address
from typing import Any, TypeVar

from magw.model.egressgw import (
    MAX_ADVERT_INT,
    MAX_VRID,
    MIN_ADVERT_INT,
    MIN_VRID,
    EgressBinding,
    EgressConfig,
    EgressGateway,
    EgressVIP,
    EgressVIPStatus,
)
from magw.snapshot.fields import FieldError, Fields, boolean, cidr_list, integer, ipv4, item_path, sequence, string

_T = TypeVar("_T")

SECTION_KEYS = ("config", "vips", "statuses")
FIELDS: dict[str, tuple[str, ...]] = {
    "EgressConfig": ("vipRanges", "advertInt", "conntrackSync"),
    "EgressVIP": ("name", "vip", "vrid", "candidates", "bindings"),
    "EgressVIPStatus": ("name", "holder", "since", "services", "conflicts"),
}
# A Kubernetes object name (RFC 1123 subdomain): it names files, CRs and keepalived's vrrp_instance.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_NAME_MAX = 253
# "namespace/name" of a Service in a status.
_SERVICE_REF = re.compile(r"^[^/\s]+/[^/\s]+$")


def object_name(value: object, path: str, what: str = "name") -> str:
    """A Kubernetes-style object name: lower-case letters, digits, '-' and '.', starting and ending alnum."""
    text = string(value, path)
    if len(text) > _NAME_MAX or not _NAME.match(text):
        raise FieldError(path, f"{what} {text!r} must be lower-case letters, digits, '-' or '.' (RFC 1123)")
    return text


def _opt(f: Fields, key: str, parse: Callable[[object, str], _T], default: _T) -> _T:
    return parse(f.optional(key), f.at(key)) if f.has(key) else default


def advert_int(value: object, path: str) -> float:
    """Seconds, 0.01..40.95, a whole number of centiseconds (VRRPv3's unit)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(path, f"expected a number of seconds, got {value!r}")
    seconds = float(value)
    if not MIN_ADVERT_INT <= seconds <= MAX_ADVERT_INT:
        raise FieldError(path, f"{seconds:g} s is out of range {MIN_ADVERT_INT:g}..{MAX_ADVERT_INT:g} (VRRPv3)")
    if abs(seconds * 100 - round(seconds * 100)) > 1e-6:
        raise FieldError(path, f"{seconds:g} s is not a whole number of centiseconds (VRRPv3's unit)")
    return round(seconds * 100) / 100


def config(value: object, path: str) -> EgressConfig:
    f = Fields(value, path, FIELDS["EgressConfig"])
    default = EgressConfig()
    return EgressConfig(
        vip_ranges=tuple(_opt(f, "vipRanges", cidr_list, [])),
        advert_int=_opt(f, "advertInt", advert_int, default.advert_int),
        conntrack_sync=_opt(f, "conntrackSync", boolean, default.conntrack_sync),
    )


def _unicast(value: object, path: str) -> IPv4Address:
    ip = ipv4(value, path)
    if ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip.is_link_local or ip == IPv4Address(2**32 - 1):
        raise FieldError(path, f"{ip} cannot be a VIP (unspecified, loopback, link-local, multicast or broadcast)")
    return ip


def _distinct(items: Sequence[_T], path: str, show: Callable[[_T], str]) -> None:
    seen: set[_T] = set()
    for i, item in enumerate(items):
        if item in seen:
            raise FieldError(item_path(path, i), f"{show(item)} is listed twice")
        seen.add(item)


def binding(value: object, path: str) -> EgressBinding:
    f = Fields(value, path, ("namespace", "service"))
    ns = object_name(f.required("namespace"), f.at("namespace"), "namespace")
    svc = _opt(f, "service", lambda v, p: object_name(v, p, "service"), "")
    return EgressBinding(namespace=ns, service=svc)


def vip(value: object, path: str) -> EgressVIP:
    f = Fields(value, path, FIELDS["EgressVIP"])
    candidates = [
        object_name(c, item_path(f.at("candidates"), i), "node")
        for i, c in enumerate(sequence(f.required("candidates"), f.at("candidates")))
    ]
    if not candidates:
        raise FieldError(f.at("candidates"), "at least one candidate node is needed to hold the VIP")
    _distinct(candidates, f.at("candidates"), lambda c: f"node {c}")
    raw_bindings = sequence(f.optional("bindings") or [], f.at("bindings"))
    bindings = [binding(b, item_path(f.at("bindings"), i)) for i, b in enumerate(raw_bindings)]
    _distinct(bindings, f.at("bindings"), str)
    return EgressVIP(
        name=object_name(f.required("name"), f.at("name")),
        vip=_unicast(f.required("vip"), f.at("vip")),
        vrid=integer(f.required("vrid"), f.at("vrid"), low=MIN_VRID, high=MAX_VRID),
        candidates=tuple(candidates),
        bindings=bindings,
    )


def _service_ref(value: object, path: str) -> str:
    text = string(value, path)
    if not _SERVICE_REF.match(text):
        raise FieldError(path, f"{text!r} is not namespace/name")
    return text


def _maybe_empty(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {value!r}")
    return value


def status(value: object, path: str) -> tuple[str, EgressVIPStatus]:
    f = Fields(value, path, FIELDS["EgressVIPStatus"])
    services = [
        _service_ref(s, item_path(f.at("services"), i))
        for i, s in enumerate(sequence(f.optional("services") or [], f.at("services")))
    ]
    _distinct(services, f.at("services"), lambda s: f"service {s}")
    conflicts = [
        string(c, item_path(f.at("conflicts"), i))
        for i, c in enumerate(sequence(f.optional("conflicts") or [], f.at("conflicts")))
    ]
    return object_name(f.required("name"), f.at("name")), EgressVIPStatus(
        holder=_opt(f, "holder", _maybe_empty, ""),
        since=_opt(f, "since", _maybe_empty, ""),
        services=services,
        conflicts=conflicts,
    )


def _ranges_text(cfg: EgressConfig) -> str:
    return ", ".join(str(n) for n in cfg.vip_ranges) if cfg.vip_ranges else "none configured"


def in_ranges(cfg: EgressConfig, address: IPv4Address) -> bool:
    return any(address in net for net in cfg.vip_ranges)


def check_vips(cfg: EgressConfig, vips: Sequence[EgressVIP], path: str) -> None:
    """Relations between VIPs and with the config: unique name, vrid and address; inside ``vipRanges``."""
    firsts: dict[tuple[str, object], int] = {}
    for i, v in enumerate(vips):
        at = item_path(path, i)
        for what, key in (("name", v.name), ("vrid", v.vrid), ("vip", v.vip)):
            first = firsts.setdefault((what, key), i)
            if first != i:
                raise FieldError(f"{at}.{what}", f"{what} {key} is also VIP {vips[first].name}'s")
        if not in_ranges(cfg, v.vip):
            raise FieldError(f"{at}.vip", f"{v.vip} is outside the egress VIP ranges ({_ranges_text(cfg)})")


def parse_egressgw(raw: object, path: str = "egress") -> EgressGateway:
    """The snapshot's ``egress:`` section: ``{config: {...}, vips: [...], statuses: [...]}``."""
    f = Fields(raw, path, SECTION_KEYS)
    cfg = _opt(f, "config", config, EgressConfig())
    raw_vips = sequence(f.optional("vips") or [], f.at("vips"))
    vips = [vip(v, item_path(f.at("vips"), i)) for i, v in enumerate(raw_vips)]
    check_vips(cfg, vips, f.at("vips"))
    raw_statuses = sequence(f.optional("statuses") or [], f.at("statuses"))
    statuses = [status(s, item_path(f.at("statuses"), i)) for i, s in enumerate(raw_statuses)]
    _distinct([name for name, _ in statuses], f.at("statuses"), lambda n: f"status of {n}")
    return EgressGateway(config=cfg, vips=vips, statuses=statuses)


# ----- the way back -------------------------------------------------------------------------------


def config_to_doc(cfg: EgressConfig) -> dict[str, Any]:
    return {
        "vipRanges": [str(n) for n in cfg.vip_ranges],
        "advertInt": cfg.advert_int,
        "conntrackSync": cfg.conntrack_sync,
    }


def binding_to_doc(b: EgressBinding) -> dict[str, str]:
    return {"namespace": b.namespace, "service": b.service} if b.service else {"namespace": b.namespace}


def vip_to_doc(v: EgressVIP) -> dict[str, Any]:
    """An EgressVIP body (the broker document adds ``kind`` and ``cluster``)."""
    return {
        "name": v.name,
        "vip": str(v.vip),
        "vrid": v.vrid,
        "candidates": list(v.candidates),
        "bindings": [binding_to_doc(b) for b in v.bindings],
    }


def status_to_doc(name: str, st: EgressVIPStatus) -> dict[str, Any]:
    """An EgressVIPStatus body (the broker document adds ``kind`` and ``cluster``); ``conflicts`` only when
    there are any."""
    doc: dict[str, Any] = {"name": name, "holder": st.holder, "since": st.since, "services": list(st.services)}
    if st.conflicts:
        doc["conflicts"] = list(st.conflicts)
    return doc


def egressgw_to_doc(egress: EgressGateway) -> dict[str, Any]:
    """The snapshot's ``egress:`` section: ``parse_egressgw(egressgw_to_doc(e)) == e`` for a valid ``e``."""
    return {
        "config": config_to_doc(egress.config),
        "vips": [vip_to_doc(v) for v in egress.vips],
        "statuses": [status_to_doc(n, s) for n, s in egress.statuses],
    }
