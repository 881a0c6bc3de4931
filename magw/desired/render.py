"""Render a DesiredState as stable text (close to ``ip``/``bridge``/``nft`` output) or as JSON.

The text lists the objects kind by kind, in ``KINDS`` order and sorted by key,
then the nft table in ``nft list`` layout. It is what golden tests compare and
what ``magw plan`` prints. The JSON resolves every route to its paths whatever
the strategy (``nhid`` -> group -> nexthops), so two strategies can be compared
path by path.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Address
from socket import inet_ntoa
from typing import Any

from magw.desired.cable.values import WgDevice
from magw.desired.nft.expr import element_json
from magw.desired.nft.text import table_text
from magw.desired.nft.values import NftTable
from magw.desired.state import (
    MAIN_TABLE,
    Address,
    DesiredState,
    Fdb,
    Link,
    Neighbor,
    Nexthop,
    NexthopGroup,
    Route,
    RouteNexthop,
    Rule,
)


def _table_name(table: int) -> str:
    return "main" if table == MAIN_TABLE else str(table)


# --- text ----------------------------------------------------------------------------------------


def link_text(link: Link) -> str:
    local = f" local {link.local}" if link.local is not None else ""
    learning = "learning" if link.learning else "nolearning"
    state = "up" if link.up else "down"
    if link.external:  # the egress gateway's collect-metadata device (docs/egress-datapath.md)
        gpe = " gpe" if link.gpe else ""
        return f"link {link.name} type vxlan external{gpe} dstport {link.port} mtu {link.mtu} {state}"
    return (
        f"link {link.name} type vxlan id {link.vni} dstport {link.port} {learning}{local} mtu {link.mtu} "
        f"address {link.mac} {state}"
    )


def address_text(addr: Address) -> str:
    return f"addr {addr.address} dev {addr.dev}"


def neighbor_text(neigh: Neighbor) -> str:
    return f"neigh {neigh.ip} dev {neigh.dev} lladdr {neigh.mac} nud permanent"


def fdb_text(fdb: Fdb) -> str:
    port = "" if fdb.port is None else f" port {fdb.port}"  # as `bridge fdb show` prints it: only when set
    return f"fdb {fdb.mac} dev {fdb.dev} dst {fdb.dst}{port} self permanent"


def nexthop_text(nh: Nexthop) -> str:
    return f"nexthop id {nh.id} via {nh.via} dev {nh.dev}"


def group_text(group: NexthopGroup) -> str:
    members = "/".join(str(m.id) if m.weight == 1 else f"{m.id},{m.weight}" for m in group.members)
    text = f"nexthop id {group.id} group {members}"
    if group.type == "resilient":
        text += (
            f" type resilient buckets {group.buckets} idle_timer {group.idle_timer}"
            f" unbalanced_timer {group.unbalanced_timer}"
        )
    return text


def _path_text(hop: RouteNexthop) -> str:
    return f"via {hop.via} dev {hop.dev}"


def route_text(route: Route) -> str:
    """One route; a multipath route continues on indented ``nexthop`` lines."""
    table = _table_name(route.table)
    # Shaped for speed (docs/performance.md): magw apply prints one line per route, 100k at an initial sync, and
    # str() of ipaddress objects is Python code (~2 us each); inet_ntoa of the packed bytes is C.
    dst = f"{inet_ntoa(route.dst.network_address.packed)}/{route.dst.prefixlen}"
    if route.type != "unicast":
        return f"route {route.type} {dst} table {table} metric {route.metric}"
    parts = [f"route {dst} table {table}"]
    if route.nhid is not None:
        parts.append(f"nhid {route.nhid}")
    elif len(route.nexthops) == 1:
        parts.append(_path_text(route.nexthops[0]))
    if route.src is not None:
        parts.append(f"src {inet_ntoa(route.src.packed)}")
    if route.encap is not None:
        parts.append(f"encap ip id {route.encap.id} dst {route.encap.dst}")
    parts.append(f"metric {route.metric}")
    lines = [" ".join(parts)]
    if route.nhid is None and len(route.nexthops) > 1:
        lines += [f"    nexthop {_path_text(h)} weight {h.weight}" for h in route.nexthops]
    return "\n".join(lines)


class RouteLines:
    """``object_line("routes", route)`` for many routes in turn, the common route in a third of the time.

    Shaped for speed (docs/performance.md): ``magw apply`` prints a line per route it creates, 100k at an initial sync,
    and ``route_text`` (a list of parts, three joins, the strip of ``object_line``) was about 3.5 us a line. The
    common route (unicast via ``nhid``, no encap) is one f-string here; the ``src`` text is kept while the
    routes share the very same address object (a gateway's routes all carry its CNI IP), so it is formatted
    once. Every other route takes ``object_line``. tests/unit/desired/test_render_routelines.py holds both to the
    same text.
    """

    def __init__(self) -> None:
        self._src: IPv4Address | None = None
        self._src_text = ""

    def __call__(self, route: Route, verb: str = "") -> str:
        """The route's line, after ``verb`` and a space when one is given (``create route ...``)."""
        head = f"{verb} " if verb else ""
        if route.nhid is None or route.encap is not None or route.type != "unicast":
            return head + object_line("routes", route)
        src = route.src
        if src is not self._src:
            self._src = src
            self._src_text = "" if src is None else f" src {inet_ntoa(src.packed)}"
        dst = route.dst
        table = "main" if route.table == MAIN_TABLE else route.table
        return (
            f"{head}route {inet_ntoa(dst.network_address.packed)}/{dst.prefixlen} table {table} nhid {route.nhid}"
            f"{self._src_text} metric {route.metric}"
        )


def rule_text(rule: Rule) -> str:
    iif = f" iif {rule.iif}" if rule.iif is not None else ""
    if rule.fwmark is not None:
        iif += f" fwmark {rule.fwmark:#x}/{rule.fwmask if rule.fwmask is not None else 0xFFFFFFFF:#x}"
    return f"rule {rule.priority}: from all{iif} lookup {_table_name(rule.table)}"


_KIND_TEXT: dict[str, Any] = {
    "links": link_text,
    "addresses": address_text,
    "neighbors": neighbor_text,
    "fdb": fdb_text,
    "nexthops": nexthop_text,
    "groups": group_text,
    "routes": route_text,
    "rules": rule_text,
}


def object_line(kind: str, obj: Any) -> str:
    """One object of ``kind`` on one line: its ``render_text`` lines, stripped, joined by spaces.

    What ``magw apply`` prints per change. Shaped for speed (docs/performance.md): rendering a one-object
    DesiredState per change cost about 35 us a line, 3.5 s for an initial sync of 100k routes.
    """
    text: str = _KIND_TEXT[kind](obj)
    if "\n" not in text:
        return text.strip()
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def render_text(state: DesiredState) -> str:
    """The whole state as text, one object per line (multipath routes use several)."""
    lines = [
        *(link_text(o) for o in state.links),
        *(address_text(o) for o in state.addresses),
        *(neighbor_text(o) for o in state.neighbors),
        *(fdb_text(o) for o in state.fdb),
        *(nexthop_text(o) for o in state.nexthops),
        *(group_text(o) for o in state.groups),
        *(route_text(o) for o in state.routes),
        *(rule_text(o) for o in state.rules),
    ]
    if state.cable is not None:
        lines += cable_text(state.cable)
    text = "\n".join(lines) + "\n" if lines else ""
    for table in state.nft_tables():
        text += ("\n" if text else "") + table_text(table)
    return text


# --- JSON ----------------------------------------------------------------------------------------


def resolve_paths(state: DesiredState, route: Route) -> tuple[RouteNexthop, ...]:
    """The paths of ``route``, sorted by via: inline nexthops, or ``nhid`` resolved through groups.

    References that do not resolve are left out (an observed state may be
    inconsistent); planned states never have them.
    """
    if route.nhid is None:
        return tuple(sorted(route.nexthops, key=lambda h: (h.via, h.dev)))
    nexthops = {nh.id: nh for nh in state.nexthops}
    groups = {g.id: g for g in state.groups}
    if route.nhid in nexthops:
        nh = nexthops[route.nhid]
        return (RouteNexthop(via=nh.via, dev=nh.dev, weight=1),)
    group = groups.get(route.nhid)
    if group is None:
        return ()
    hops = [
        RouteNexthop(via=nexthops[m.id].via, dev=nexthops[m.id].dev, weight=m.weight)
        for m in group.members
        if m.id in nexthops
    ]
    return tuple(sorted(hops, key=lambda h: (h.via, h.dev)))


def _route_json(state: DesiredState, route: Route) -> dict[str, Any]:
    out = _route_json_base(state, route)
    if route.encap is not None:  # only when set: the JSON of routes without it is unchanged
        out["encap"] = {"type": "ip", "id": route.encap.id, "dst": str(route.encap.dst)}
    return out


def _route_json_base(state: DesiredState, route: Route) -> dict[str, Any]:
    return {
        "table": route.table,
        "dst": str(route.dst),
        "metric": route.metric,
        "src": None if route.src is None else str(route.src),
        "type": route.type,
        "nhid": route.nhid,
        "nexthops": [{"via": str(h.via), "dev": h.dev, "weight": h.weight} for h in resolve_paths(state, route)],
    }


def nft_json(table: NftTable) -> dict[str, Any]:
    """The table as libnftables JSON (``nft -j list`` without handles and metainfo)."""
    family, name = table.family, table.name
    objects: list[dict[str, Any]] = [{"table": {"family": family, "name": name}}]
    for s in table.sets:
        body: dict[str, Any] = {"family": family, "table": name, "name": s.name, "type": s.type}
        if s.flags:
            body["flags"] = list(s.flags)
        if s.elements:
            body["elem"] = [element_json(e) for e in s.elements]
        objects.append({"set": body})
    for m in table.maps:
        mbody: dict[str, Any] = {"family": family, "table": name, "name": m.name, "type": m.type, "map": m.map}
        if m.flags:
            mbody["flags"] = list(m.flags)
        if m.elements:
            mbody["elem"] = [[element_json(k), v] for k, v in m.elements]
        objects.append({"map": mbody})
    for c in table.chains:
        cbody: dict[str, Any] = {"family": family, "table": name, "name": c.name}
        if c.hook is not None:
            cbody.update(type=c.type, hook=c.hook, prio=c.priority, policy=c.policy)
        objects.append({"chain": cbody})
    for r in table.rules:
        rbody: dict[str, Any] = {"family": family, "table": name, "chain": r.chain, "expr": json.loads(r.expr)}
        if r.comment is not None:
            rbody["comment"] = r.comment
        objects.append({"rule": rbody})
    return {"nftables": objects}


def _link_json(o: Link) -> dict[str, Any]:
    local = None if o.local is None else str(o.local)
    out: dict[str, Any] = {
        "name": o.name,
        "vni": o.vni,
        "port": o.port,
        "mtu": o.mtu,
        "mac": o.mac,
        "local": local,
        "learning": o.learning,
        "up": o.up,
    }
    if o.external:  # only when set: the JSON of the Submariner devices is unchanged
        out.update(external=True, gpe=o.gpe)
    return out


def _fdb_json(o: Fdb) -> dict[str, Any]:
    out: dict[str, Any] = {"mac": o.mac, "dev": o.dev, "dst": str(o.dst)}
    if o.port is not None:  # only when set, as `bridge -j fdb show` has it: the JSON of other entries is unchanged
        out["port"] = o.port
    return out


def _group_json(o: NexthopGroup) -> dict[str, Any]:
    members = [{"id": m.id, "weight": m.weight} for m in o.members]
    return {
        "id": o.id,
        "type": o.type,
        "members": members,
        "buckets": o.buckets,
        "idle_timer": o.idle_timer,
        "unbalanced_timer": o.unbalanced_timer,
    }


def render_json(state: DesiredState) -> dict[str, Any]:
    """The state as plain JSON values; ``json.dumps(..., sort_keys=True)`` of it is deterministic."""
    return {
        "links": [_link_json(o) for o in state.links],
        "addresses": [{"dev": o.dev, "address": str(o.address)} for o in state.addresses],
        "neighbors": [{"dev": o.dev, "ip": str(o.ip), "mac": o.mac} for o in state.neighbors],
        "fdb": [_fdb_json(o) for o in state.fdb],
        "nexthops": [{"id": o.id, "via": str(o.via), "dev": o.dev} for o in state.nexthops],
        "groups": [_group_json(o) for o in state.groups],
        "routes": [_route_json(state, o) for o in state.routes],
        "rules": [
            {
                "priority": o.priority,
                "table": o.table,
                **({"iif": o.iif} if o.iif is not None else {}),
                **({"fwmark": o.fwmark, "fwmask": o.fwmask} if o.fwmark is not None else {}),
            }
            for o in state.rules
        ],
        "nft": None if state.nft is None else nft_json(state.nft),
        **({"extra_nft": [nft_json(t) for t in state.extra_nft]} if state.extra_nft else {}),
        **({"cable": cable_json(state.cable)} if state.cable is not None else {}),
    }


def cable_text(device: WgDevice) -> list[str]:
    """The WireGuard device and its peers, one line each, in ``wg set`` words (no private key: it is not planned)."""
    head = f"wireguard {device.name} listen-port {device.listen_port} mtu {device.mtu} address {device.address}"
    return [
        head,
        *(
            f"wireguard {device.name} peer {p.public_key} endpoint {p.endpoint}:{p.port} "
            f"allowed-ips {','.join(str(a) for a in p.allowed_ips)}  # {p.owner}"
            for p in device.peers
        ),
    ]


def cable_json(device: WgDevice) -> dict[str, Any]:
    return {
        "type": "wireguard",
        "name": device.name,
        "listen_port": device.listen_port,
        "mtu": device.mtu,
        "address": str(device.address),
        "peers": [
            {
                "public_key": p.public_key,
                "owner": p.owner,
                "endpoint": f"{p.endpoint}:{p.port}",
                "allowed_ips": [str(a) for a in p.allowed_ips],
            }
            for p in device.peers
        ],
    }
