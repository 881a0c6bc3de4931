"""An independent reader of a namespace: iproute2, bridge and nft JSON, in the shape of ``magw plan --format json``.

Nothing here uses magw's drivers, planner or diff: the kernel is read with ``ip -json -d``,
``bridge -json fdb show`` and ``nft -j list ruleset``, and compared with the plan as the
``magw plan --format json`` command prints it. What existed before magw ran (the baseline)
is foreign: it must stay byte-identical, and everything else must be exactly the plan.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import attrs

from tests.support.netns import bridge_json, ip_json, nft_json

TABLE_IDS = {"main": 254, "local": 255, "default": 253}
KINDS = ("links", "addresses", "neighbors", "fdb", "nexthops", "groups", "routes", "rules", "nft")


def _key(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


def _table(value: Any) -> int:
    return TABLE_IDS[value] if value in TABLE_IDS else int(value)


@attrs.frozen
class Dump:
    """Raw iproute2/bridge/nft JSON of a namespace, one list per kind."""

    links: list[dict[str, Any]]
    addrs: list[dict[str, Any]]
    neighbors: list[dict[str, Any]]
    fdb: list[dict[str, Any]]
    nexthops: list[dict[str, Any]]
    routes: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    nft: list[dict[str, Any]]


def read(ns: str) -> Dump:
    """Everything in ``ns`` that magw could own or touch, as the tools print it."""
    return Dump(
        links=[{k: v for k, v in link.items() if k != "operstate"} for link in ip_json(ns, "-d", "link", "show")],
        addrs=ip_json(ns, "-4", "addr", "show"),
        neighbors=ip_json(ns, "-4", "neigh", "show"),
        fdb=bridge_json(ns, "fdb", "show"),
        nexthops=ip_json(ns, "-d", "nexthop", "show"),
        routes=ip_json(ns, "-4", "-d", "route", "show", "table", "all"),
        rules=ip_json(ns, "-4", "rule", "show"),
        nft=[o for o in nft_json(ns, "list", "ruleset")["nftables"] if "metainfo" not in o],
    )


def _route_id(route: dict[str, Any]) -> str:
    return _key([route.get("table", "main"), route["dst"], route.get("metric", 0), route.get("protocol")])


def _nft_table(obj: dict[str, Any]) -> tuple[str, str]:
    body = next(iter(obj.values()))
    return (body["family"], body["name"] if "table" in obj else body["table"])


@attrs.frozen
class Baseline:
    """The identities of what existed before magw ran, and its full text."""

    links: frozenset[str]
    nexthops: frozenset[int]
    routes: frozenset[str]
    rules: frozenset[str]
    nft_tables: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, dump: Dump) -> Baseline:
        return cls(
            links=frozenset(link["ifname"] for link in dump.links),
            nexthops=frozenset(nh["id"] for nh in dump.nexthops),
            routes=frozenset(_route_id(r) for r in dump.routes),
            rules=frozenset(_key(r) for r in dump.rules),
            nft_tables=frozenset(_nft_table(o) for o in dump.nft if "table" in o),
        )


def foreign(dump: Dump, base: Baseline) -> str:
    """The part of ``dump`` that belongs to the baseline, as text: equal before and after means untouched."""
    on_foreign = [a for a in dump.addrs if a["ifname"] in base.links]
    parts = {
        "links": [link for link in dump.links if link["ifname"] in base.links],
        "addrs": on_foreign,
        "neighbors": [n for n in dump.neighbors if n["dev"] in base.links],
        "fdb": [f for f in dump.fdb if f["ifname"] in base.links],
        "nexthops": [nh for nh in dump.nexthops if nh["id"] in base.nexthops],
        "routes": [r for r in dump.routes if _route_id(r) in base.routes],
        "rules": [r for r in dump.rules if _key(r) in base.rules],
        "nft": [o for o in dump.nft if _nft_table(o) in base.nft_tables],
    }
    return json.dumps(parts, sort_keys=True, indent=1)


def _link(link: dict[str, Any]) -> dict[str, Any]:
    data = link.get("linkinfo", {}).get("info_data", {})
    return {
        "name": link["ifname"],
        "kind": link.get("linkinfo", {}).get("info_kind"),
        "vni": data.get("id"),
        "port": data.get("port"),
        "mtu": link["mtu"],
        "mac": link["address"],
        "local": data.get("local"),
        "learning": data.get("learning"),
        "up": "UP" in link["flags"],
    }


def _nexthop(nh: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if "group" not in nh:
        extra = {k: nh[k] for k in ("protocol",) if nh.get(k) != "157"}
        return "nexthops", {"id": nh["id"], "via": nh.get("gateway"), "dev": nh.get("dev"), **extra}
    args = nh.get("resilient_args", {})
    return "groups", {
        "id": nh["id"],
        "type": nh.get("type", "mpath"),
        "members": [{"id": m["id"], "weight": m.get("weight", 1)} for m in nh["group"]],
        "buckets": args.get("buckets"),
        "idle_timer": args.get("idle_timer"),
        "unbalanced_timer": args.get("unbalanced_timer"),
    }


def _paths(route: dict[str, Any]) -> list[dict[str, Any]]:
    if "nexthops" in route:
        hops = [{"via": h["gateway"], "dev": h["dev"], "weight": h.get("weight", 1)} for h in route["nexthops"]]
    elif "gateway" in route:
        hops = [{"via": route["gateway"], "dev": route["dev"], "weight": 1}]
    else:
        hops = []
    return sorted(hops, key=lambda h: (h["via"], h["dev"]))


def _dst(text: str) -> str:
    """``ip -j``'s dst as a CIDR: it prints a host route without its /32 and 0.0.0.0/0 as ``default``."""
    if text == "default":
        return "0.0.0.0/0"
    return text if "/" in text else f"{text}/32"


def _route(route: dict[str, Any]) -> dict[str, Any]:
    out = {
        "table": _table(route.get("table", "main")),
        "dst": _dst(route["dst"]),
        "metric": route.get("metric", 0),
        "src": route.get("prefsrc"),
        "type": route.get("type", "unicast"),
        "nhid": route.get("nhid"),
        "nexthops": _paths(route),
    }
    if route.get("protocol") != "157":
        out["protocol"] = route.get("protocol")
    return out


def _strip_handles(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_handles(v) for k, v in value.items() if k != "handle"}
    if isinstance(value, list):
        return [_strip_handles(v) for v in value]
    return value


def _nft_objects(obj: dict[str, Any]) -> list[str]:
    """One nft object as canonical text; a set's or map's elements as one text each (the object itself
    without them), so that a stale, missing or duplicated element is reported as such."""
    kind, body = next(iter(_strip_handles(obj).items()))
    elements = body.pop("elem", [])
    where = {"family": body["family"], "table": body["table"], kind: body["name"]} if elements else {}
    return [_key({kind: body}), *(_key({"elem": {**where, "value": e}}) for e in elements)]


def ours(dump: Dump, base: Baseline) -> dict[str, list[str]]:
    """Everything not in the baseline, in plan shape, each object as canonical text, sorted."""
    mine = {link["ifname"] for link in dump.links} - base.links
    out: dict[str, list[Any]] = {kind: [] for kind in KINDS}
    out["links"] = [_link(link) for link in dump.links if link["ifname"] in mine]
    out["addresses"] = [
        {"dev": a["ifname"], "address": f"{i['local']}/{i['prefixlen']}"}
        for a in dump.addrs
        if a["ifname"] in mine
        for i in a.get("addr_info", [])
    ]
    out["neighbors"] = [
        {
            "dev": n["dev"],
            "ip": n["dst"],
            "mac": n.get("lladdr"),
            **({} if n.get("state") == ["PERMANENT"] else {"state": n.get("state")}),
        }
        for n in dump.neighbors
        if n["dev"] in mine
    ]
    out["fdb"] = [
        {"mac": f["mac"], "dev": f["ifname"], "dst": f.get("dst"), **({"port": f["port"]} if "port" in f else {})}
        for f in dump.fdb
        if f["ifname"] in mine
    ]
    for nh in dump.nexthops:
        if nh["id"] not in base.nexthops:
            kind, value = _nexthop(nh)
            out[kind].append(value)
    out["routes"] = [
        _route(r)
        for r in dump.routes
        if _route_id(r) not in base.routes and r.get("protocol") != "kernel" and r.get("table") != "local"
    ]
    out["rules"] = [
        {
            "priority": r["priority"],
            "table": _table(r["table"]),
            **({"iif": r["iif"]} if r.get("iif") else {}),
            **({} if r.get("protocol") == "157" else {"protocol": r.get("protocol")}),
        }
        for r in dump.rules
        if _key(r) not in base.rules
    ]
    out["nft"] = [text for o in dump.nft if _nft_table(o) not in base.nft_tables for text in _nft_objects(o)]
    return {kind: sorted(v if kind == "nft" else _key(o) for o in values for v in [o]) for kind, values in out.items()}


def _as_nft_prints(value: Any) -> Any:
    """An address range as ``nft -j`` prints it back: one that is exactly a prefix (242.1.0.4-242.1.0.5) as that
    prefix, one address as the address; every other value unchanged."""
    if isinstance(value, list):
        return [_as_nft_prints(v) for v in value]
    if not isinstance(value, dict):
        return value
    span = value.get("range") if len(value) == 1 else None
    if isinstance(span, list) and len(span) == 2 and all(isinstance(a, str) for a in span):
        try:
            nets = list(ipaddress.summarize_address_range(ipaddress.ip_address(span[0]), ipaddress.ip_address(span[1])))
        except (ValueError, TypeError):
            nets = []
        if len(nets) == 1:
            net = nets[0]
            if net.num_addresses == 1:
                return str(net.network_address)
            return {"prefix": {"addr": str(net.network_address), "len": net.prefixlen}}
    return {k: _as_nft_prints(v) for k, v in value.items()}


def planned(plan: dict[str, Any]) -> dict[str, list[str]]:
    """``magw plan --format json`` output in the same canonical form as :func:`ours` (address ranges as nft prints
    them back: ``_as_nft_prints``)."""
    out: dict[str, list[str]] = {}
    for kind in KINDS:
        if kind == "nft":
            objects = [] if plan["nft"] is None else plan["nft"]["nftables"]
            out[kind] = sorted(text for o in objects for text in _nft_objects(_as_nft_prints(o)))
        elif kind == "links":
            out[kind] = sorted(_key({**link, "kind": "vxlan"}) for link in plan[kind])
        else:
            out[kind] = sorted(_key(o) for o in plan[kind])
    return out


def differences(want: dict[str, list[str]], got: dict[str, list[str]], limit: int = 3) -> list[str]:
    """Human lines: per kind, what is missing from the kernel and what is extra (stale or duplicated)."""
    lines = []
    for kind in KINDS:
        missing = sorted(set(want[kind]) - set(got[kind]))
        extra = sorted(set(got[kind]) - set(want[kind]))
        dupes = len(got[kind]) - len(set(got[kind]))
        if missing:
            lines.append(f"{kind}: {len(missing)} missing, e.g. {missing[:limit]}")
        if extra:
            lines.append(f"{kind}: {len(extra)} extra (stale), e.g. {extra[:limit]}")
        if dupes:
            lines.append(f"{kind}: {dupes} duplicated")
    return lines
