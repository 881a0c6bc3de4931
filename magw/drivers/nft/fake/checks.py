"""More of what nft 1.0.6 and kernel 6.18 refuse, for ``FakeNft``: statements, meta keys, datatypes, jump loops.

``magw.drivers.nft.fake.kernel_checks`` models references, hooks and NAT; this module adds
what nft refuses while it parses or evaluates a rule, and the kernel's loop check.
Each case was read back from ``NftDriver`` in a throwaway namespace:

- a statement nft does not know (``{"frobnicate": null}``): "Unknown statement object
  'frobnicate'." The known ones are ``STATEMENTS`` (nft 1.0.6 also has no ``map`` or
  ``last`` statement);
- a meta key nft does not know (``{"meta": {"key": "bogus"}}``): "syntax error,
  unexpected bogus, known keys are length, protocol, ...";
- a set, map or verdict-map lookup whose key expression has another type than the
  set: "datatype mismatch, expected IPv4 address, expression has type internet network
  service" (``ip saddr @ports``);
- a ``jump``/``goto`` loop reachable from a base chain (also through a verdict map):
  ELOOP "Could not process rule: Too many links". A loop no base chain reaches is
  accepted, as the kernel does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from magw.desired.nft.refs import chain_targets
from magw.desired.nft.values import NftTable
from magw.drivers.nft.preflight import parse_expr

STATEMENTS = frozenset(
    {
        *("accept", "drop", "continue", "jump", "goto", "return"),
        *("match", "counter", "mangle", "quota", "limit", "flow", "fwd", "notrack", "dup"),
        *("snat", "dnat", "masquerade", "redirect", "reject", "set", "log", "meter", "queue"),
        *("ct helper", "ct timeout", "ct expectation", "ct count", "tproxy", "synproxy", "reset", "secmark"),
        *("vmap", "xt"),
    }
)

# nft 1.0.6's own list, in its order (its "known keys are ..." message).
META_KEYS = (
    *("length", "protocol", "priority", "mark", "iif", "oif", "iifname", "oifname", "iiftype", "oiftype"),
    *("skuid", "skgid", "nftrace", "rtclassid", "secmark", "nfproto", "l4proto", "ibrname", "obrname"),
    *("pkttype", "cpu", "iifgroup", "oifgroup", "cgroup", "random", "ipsec", "iifkind", "oifkind"),
    *("ibrpvid", "ibrvproto", "time", "day", "hour", "sdif", "sdifname"),
)

# The set types of the expressions whose datatype the fake checks; any other expression is not checked.
_PAYLOAD_TYPES = {
    ("ip", "saddr"): "ipv4_addr",
    ("ip", "daddr"): "ipv4_addr",
    ("ip", "protocol"): "inet_proto",
    ("ip6", "saddr"): "ipv6_addr",
    ("ip6", "daddr"): "ipv6_addr",
    ("ether", "saddr"): "ether_addr",
    ("ether", "daddr"): "ether_addr",
    **{(proto, port): "inet_service" for proto in ("tcp", "udp", "sctp", "th") for port in ("sport", "dport")},
}
_META_TYPES = {"mark": "mark", "iifname": "ifname", "oifname": "ifname", "l4proto": "inet_proto"}
_CT_TYPES = {"mark": "mark"}


def _walk(node: Any) -> Iterator[Any]:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)


def expr_type(node: Any) -> str | None:
    """The set type an expression's value has (``ipv4_addr``, ``inet_service . mark``...), None: not modelled."""
    if not isinstance(node, dict) or len(node) != 1:
        return None
    (kind, inner), *_ = node.items()
    if kind == "concat" and isinstance(inner, list):
        parts = [expr_type(part) for part in inner]
        return None if None in parts else " . ".join(str(p) for p in parts)
    if not isinstance(inner, dict):
        return None
    if kind == "payload":
        return _PAYLOAD_TYPES.get((str(inner.get("protocol")), str(inner.get("field"))))
    if kind == "meta":
        return _META_TYPES.get(str(inner.get("key")))
    if kind == "ct":
        return _CT_TYPES.get(str(inner.get("key")))
    return None


def _lookups(expr: list[Any]) -> Iterator[tuple[Any, str]]:
    """(key expression, set name) of every lookup in a named set or map."""
    for node in _walk(expr):
        if not isinstance(node, dict):
            continue
        match = node.get("match")
        if isinstance(match, dict) and isinstance(match.get("right"), str) and match["right"].startswith("@"):
            yield match.get("left"), match["right"][1:]
        for kind in ("map", "vmap"):
            inner = node.get(kind)
            if isinstance(inner, dict) and isinstance(inner.get("data"), str) and inner["data"].startswith("@"):
                yield inner.get("key"), inner["data"][1:]
        stmt = node.get("set")
        if isinstance(stmt, dict) and isinstance(stmt.get("set"), str) and stmt["set"].startswith("@"):
            yield stmt.get("elem"), stmt["set"][1:]


def _rule_errors(chain: str, expr: list[Any], set_types: dict[str, str]) -> list[str]:
    where = f"rule in chain {chain}"
    errors = [
        f"EINVAL: {where}: Unknown statement object '{key}'." for stmt in expr for key in stmt if key not in STATEMENTS
    ]
    for node in _walk(expr):
        meta = node.get("meta") if isinstance(node, dict) else None
        if isinstance(meta, dict) and meta.get("key") not in META_KEYS:
            known = ", ".join(META_KEYS)
            errors.append(f"EINVAL: {where}: syntax error, unexpected {meta.get('key')}, known keys are {known}")
    for key, name in _lookups(expr):
        have, want = expr_type(key), set_types.get(name)
        if have is not None and want is not None and have != want:
            errors.append(f"EINVAL: {where}: datatype mismatch, @{name} holds {want}, the expression is {have}")
    return errors


def _loop(table: NftTable) -> list[str] | None:
    """A jump/goto cycle reachable from a base chain, as the list of chains around it, else None."""
    vmaps = {m.name: {v.split()[1] for _, v in m.elements if v.split()[0] in ("jump", "goto")} for m in table.maps}
    jumps: dict[str, set[str]] = {c.name: set() for c in table.chains}
    for rule in table.rules:
        expr = parse_expr(rule)
        names = {name for _, name in _lookups(expr)}
        jumps.setdefault(rule.chain, set()).update(chain_targets(expr), *(vmaps.get(n, set()) for n in names))
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for target in sorted(jumps.get(name, ())):
            cycle = visit(target, [*path, name])
            if cycle is not None:
                return cycle
        done.add(name)
        return None

    for base in sorted(c.name for c in table.chains if c.hook is not None):
        cycle = visit(base, [])
        if cycle is not None:
            return cycle
    return None


def table_errors(table: NftTable) -> list[str]:
    """What nft 1.0.6 or the kernel refuse in ``table`` beyond ``kernel_checks`` (run after it passed)."""
    set_types = {s.name: s.type for s in table.sets} | {m.name: m.type for m in table.maps}
    errors = [e for rule in table.rules for e in _rule_errors(rule.chain, parse_expr(rule), set_types)]
    if not errors:
        cycle = _loop(table)
        if cycle is not None:
            errors.append(f"ELOOP: jump loop {' -> '.join(cycle)}: Could not process rule: Too many links")
    return errors
