"""The egress gateway part of the lab's topology (docs/lab.md): the ``egress:`` key.

    egress:
      cluster: east            # the cluster whose pods leave through VIPs (default: the first)
      advert_int: 0.1          # keepalived's VRRPv3 advertisement interval, seconds (default 1)
      conntrack_sync: true     # conntrackd between each VIP's candidates (default true)
      vips:
        - name: shop                       # a VIP shared by namespace shop's Services
          candidates: [gw1, w1]            # node short names, preferred first
          bindings: [{namespace: shop}]
        - name: web                        # a VIP that Service blog/web owns
          vip: 172.17.0.202                # default: the underlay's .(200 + index)
          vrid: 52                         # default: 50 + index
          candidates: [w1, gw1]
          bindings: [{namespace: blog, service: web}]

VIPs live in the egress cluster's underlay (its nodes share that L2, and the GARP that moves a VIP reaches
them all), inside ``VIP_RANGE`` of it (``.192/27``), the range the lab's EgressConfig allows. The values become
the model's ``EgressVIP`` (``magw.model.egressgw``) with full node names. Errors are one line, like every
topology error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import attrs

from magw.lab.spec.cluster import ClusterSpec
from magw.lab.spec.parser import Parser
from magw.model.egressgw import DEFAULT_ADVERT_INT, MAX_ADVERT_INT, MAX_VRID, MIN_ADVERT_INT, EgressBinding

MAX_VIPS = 16
FIRST_VIP_HOST = 200  # a VIP's default address: the egress cluster's underlay + 200 + its index
FIRST_VRID = 50
VIP_RANGE_HOST = 192  # the allowed range: underlay + 192, /27 (.192 - .223): no node address is there
VIP_RANGE_PREFIX = 27
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
TOP_KEYS = frozenset({"egress"})


@attrs.frozen(kw_only=True)
class EgressVipSpec:
    name: str
    vip: IPv4Address
    vrid: int
    candidates: tuple[str, ...]  # node short names
    bindings: tuple[EgressBinding, ...] = ()


@attrs.frozen(kw_only=True)
class EgressGatewayLabSpec:
    cluster: str
    advert_int: float = DEFAULT_ADVERT_INT
    conntrack_sync: bool = True
    vips: tuple[EgressVipSpec, ...] = ()


def underlay_of(index: int) -> IPv4Network:
    """Cluster ``index``'s underlay (``magw.lab.spec.layout``: ``172.(17+i).0.0/24``)."""
    return IPv4Network(f"172.{17 + index}.0.0/24")


def vip_range(index: int) -> IPv4Network:
    return IPv4Network(f"{underlay_of(index).network_address + VIP_RANGE_HOST}/{VIP_RANGE_PREFIX}")


def parse_egressgw(p: Parser, value: object, clusters: Sequence[ClusterSpec]) -> EgressGatewayLabSpec:
    doc = p.mapping(value, "egress", {"cluster", "advert_int", "conntrack_sync", "vips"})
    ids = [c.id for c in clusters]
    cluster_id = doc.get("cluster", ids[0])
    if cluster_id not in ids:
        raise p.fail("egress.cluster", f"no cluster {cluster_id!r} (clusters: {', '.join(ids)})")
    index = ids.index(cluster_id)
    spec = clusters[index]
    advert = doc.get("advert_int", DEFAULT_ADVERT_INT)
    if (
        isinstance(advert, bool)
        or not isinstance(advert, int | float)
        or not MIN_ADVERT_INT <= advert <= MAX_ADVERT_INT
    ):
        raise p.fail("egress.advert_int", f"must be a number of seconds in {MIN_ADVERT_INT}..{MAX_ADVERT_INT}")
    if abs(round(advert * 100) - advert * 100) > 1e-6:
        raise p.fail("egress.advert_int", "VRRPv3 carries centiseconds: at most two decimals")
    items = p_sequence(p, doc.get("vips", []), "egress.vips")
    vips = tuple(_vip(p, item, f"egress.vips[{i}]", i, index, spec) for i, item in enumerate(items))
    _check_unique(p, vips)
    return EgressGatewayLabSpec(
        cluster=cluster_id,
        advert_int=float(advert),
        conntrack_sync=p.boolean(doc.get("conntrack_sync", True), "egress.conntrack_sync"),
        vips=vips,
    )


def p_sequence(p: Parser, value: object, path: str) -> list[Any]:
    return p.sequence(value, path, min_len=0, max_len=MAX_VIPS)


def _vip(p: Parser, value: object, path: str, i: int, index: int, spec: ClusterSpec) -> EgressVipSpec:
    doc = p.mapping(value, path, {"name", "vip", "vrid", "candidates", "bindings"})
    name = p.string(doc.get("name"), f"{path}.name", NAME_RE, "a DNS label of at most 40 characters")
    allowed = vip_range(index)
    raw = doc.get("vip", str(underlay_of(index).network_address + FIRST_VIP_HOST + i))
    try:
        vip = IPv4Address(str(raw))
    except ValueError:
        raise p.fail(f"{path}.vip", f"{raw!r} is not an IPv4 address") from None
    if vip not in allowed or vip in (allowed.network_address, allowed.broadcast_address):
        raise p.fail(f"{path}.vip", f"{vip} is outside the lab's VIP range {allowed} (the cluster's underlay)")
    vrid = p.integer(doc.get("vrid", FIRST_VRID + i), f"{path}.vrid", 1, MAX_VRID)
    shorts = spec.node_shorts
    cands = doc.get("candidates")
    if not isinstance(cands, list) or not cands:
        raise p.fail(f"{path}.candidates", "must be a non-empty list of node short names (gw1, w1, ...)")
    for c in cands:
        if c not in shorts:
            raise p.fail(f"{path}.candidates", f"no node {c!r} in cluster {spec.id} (nodes: {', '.join(shorts)})")
    if len(set(cands)) != len(cands):
        raise p.fail(f"{path}.candidates", "a node is listed twice")
    return EgressVipSpec(
        name=name, vip=vip, vrid=vrid, candidates=tuple(cands), bindings=_bindings(p, doc.get("bindings", []), path)
    )


def _bindings(p: Parser, value: object, path: str) -> tuple[EgressBinding, ...]:
    out = []
    for j, item in enumerate(p.sequence(value, f"{path}.bindings", min_len=0, max_len=64)):
        bpath = f"{path}.bindings[{j}]"
        doc: Mapping[str, Any] = p.mapping(item, bpath, {"namespace", "service"})
        ns = p.string(doc.get("namespace"), f"{bpath}.namespace", NAME_RE, "a DNS label of at most 40 characters")
        svc = doc.get("service", "")
        if svc:
            svc = p.string(svc, f"{bpath}.service", NAME_RE, "a DNS label of at most 40 characters")
        out.append(EgressBinding(ns, svc))
    if len(set(out)) != len(out):
        raise p.fail(f"{path}.bindings", "a binding is listed twice")
    return tuple(out)


def _check_unique(p: Parser, vips: Sequence[EgressVipSpec]) -> None:
    for what in ("name", "vip", "vrid"):
        seen: set[object] = set()
        for i, v in enumerate(vips):
            key = getattr(v, what)
            if key in seen:
                raise p.fail(f"egress.vips[{i}].{what}", f"{key} is used by another VIP")
            seen.add(key)


def egressgw_doc(spec: EgressGatewayLabSpec) -> dict[str, Any]:
    """The ``egress:`` key as ``parse_egressgw`` reads it back to an equal value."""
    return {
        "cluster": spec.cluster,
        "advert_int": spec.advert_int,
        "conntrack_sync": spec.conntrack_sync,
        "vips": [
            {
                "name": v.name,
                "vip": str(v.vip),
                "vrid": v.vrid,
                "candidates": list(v.candidates),
                "bindings": [
                    {"namespace": b.namespace, **({"service": b.service} if b.service else {})} for b in v.bindings
                ],
            }
            for v in spec.vips
        ],
    }
