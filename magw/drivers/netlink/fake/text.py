"""Sorted, one-line-per-object text of a ``FakeNetlink`` namespace (ours and foreign), for test diffs.

The lines read like ``ip``/``bridge`` output; routes name their protocol so a
foreign route stands out (``proto 157`` is ours).
"""

from __future__ import annotations

from collections.abc import Iterable

from magw.desired.state import MAIN_TABLE, Address, Fdb, Link, Neighbor, Nexthop, NexthopGroup, Route, Rule
from magw.drivers.netlink.fake.checks import AnyLink, AnyNexthop


def link_line(link: AnyLink) -> str:
    state = "up" if link.up else "down"
    if not isinstance(link, Link):
        return f"link {link.name} (not vxlan) {state}"
    local = f" local {link.local}" if link.local is not None else ""
    learning = "learning" if link.learning else "nolearning"
    if link.external:
        gpe = " gpe" if link.gpe else ""
        return f"link {link.name} type vxlan external{gpe} dstport {link.port}{local} {learning} mtu {link.mtu} {state}"
    return (
        f"link {link.name} type vxlan id {link.vni} dstport {link.port}{local} {learning}"
        f" mtu {link.mtu} address {link.mac} {state}"
    )


def fdb_line(fdb: Fdb) -> str:
    port = "" if fdb.port is None else f" port {fdb.port}"  # as `bridge fdb show` prints it: only when set
    return f"fdb {fdb.mac} dev {fdb.dev} dst {fdb.dst}{port} self permanent"


def id_line(obj: AnyNexthop) -> str:
    if isinstance(obj, Nexthop):
        return f"nexthop id {obj.id} via {obj.via} dev {obj.dev}"
    members = "/".join(str(m.id) if m.weight == 1 else f"{m.id},{m.weight}" for m in obj.members)
    line = f"nexthop id {obj.id} group {members} type {obj.type}"
    if obj.type == "resilient":
        line += f" buckets {obj.buckets} idle_timer {obj.idle_timer} unbalanced_timer {obj.unbalanced_timer}"
    return line


def route_line(route: Route, protocol: int) -> str:
    table = "main" if route.table == MAIN_TABLE else str(route.table)
    parts = ["route", *(["unreachable"] if route.type == "unreachable" else []), str(route.dst), "table", table]
    if route.nhid is not None:
        parts += ["nhid", str(route.nhid)]
    for path in route.nexthops:
        parts += ["nexthop", "via", str(path.via), "dev", path.dev, "weight", str(path.weight)]
    if route.src is not None:
        parts += ["src", str(route.src)]
    if route.encap is not None:
        parts += ["encap", "ip", "id", str(route.encap.id), "dst", str(route.encap.dst)]
    parts += ["metric", str(route.metric), "proto", str(protocol)]
    return " ".join(parts)


def rule_line(rule: Rule) -> str:
    iif = f" iif {rule.iif}" if rule.iif is not None else ""
    if rule.fwmark is not None:
        iif += f" fwmark {rule.fwmark:#x}/{rule.fwmask if rule.fwmask is not None else 0xFFFFFFFF:#x}"
    return f"rule {rule.priority}: from all{iif} lookup {rule.table}"


def dump_lines(
    *,
    links: Iterable[AnyLink],
    addresses: Iterable[Address],
    neighbors: Iterable[Neighbor],
    fdb: Iterable[Fdb],
    ids: Iterable[AnyNexthop],
    routes: Iterable[tuple[Route, int]],
    rules: Iterable[Rule],
) -> str:
    """Every object, sections in KINDS order (nexthops before groups), sorted by key within a section."""
    by_id = sorted(ids, key=lambda o: o.id)
    lines = [
        *(link_line(lk) for lk in sorted(links, key=lambda lk: lk.name)),
        *(f"addr {a.address} dev {a.dev}" for a in sorted(addresses, key=lambda a: a.key)),
        *(f"neigh {n.ip} dev {n.dev} lladdr {n.mac} nud permanent" for n in sorted(neighbors, key=lambda n: n.key)),
        *(fdb_line(f) for f in sorted(fdb, key=lambda f: f.key)),
        *(id_line(n) for n in by_id if isinstance(n, Nexthop)),
        *(id_line(g) for g in by_id if isinstance(g, NexthopGroup)),
        *(route_line(r, proto) for r, proto in sorted(routes, key=lambda rp: rp[0].key)),
        *(rule_line(r) for r in sorted(rules, key=lambda r: (r.priority, r.table, r.iif or ""))),
    ]
    return "".join(line + "\n" for line in lines)
