"""A small builder for nftables rule expressions, in canonical libnftables JSON.

Every function returns the exact shape ``nft -j list`` prints back (nft 1.0.6,
``ip`` family tables), so a rule built here, the fake's copy and the kernel's
read-back compare equal as strings once serialised with :func:`canonical`.
Verified against the kernel: see ``tests/data/nft_canonical_example.json`` and
``tests/kernel/test_planner_nft_kernel.py``.

Shapes worth knowing (all as nft prints them, not as it would also accept):

- a flag match (``ct status dnat``, ``ct state established,related``) uses
  ``op: "in"``; its negation uses ``op: "!="``;
- a ``/32`` prefix is printed as a plain address, never ``{"prefix": ...}``;
- ``snat``/``dnat`` carry no ``family`` key in an ``ip`` table;
- ``counter`` reads back as ``{"bytes": 0, "packets": 0}`` on a fresh rule; a
  driver comparing a live rule must zero the counters first.

The printer (nft text) lives in :mod:`magw.desired.nft.text`; ``rule_text`` is
re-exported here for callers that only want one import.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network
from typing import Any

from magw.desired.nft.text import rule_text
from magw.desired.nft.values import NftRule

__all__ = [
    "Expr",
    "accept",
    "addr_range",
    "anon_set",
    "bitand",
    "bitor",
    "canonical",
    "counter",
    "ct",
    "dnat",
    "drop",
    "element_json",
    "flags_in",
    "goto",
    "iifname",
    "ip_daddr",
    "ip_saddr",
    "jump",
    "mangle",
    "map_lookup",
    "masquerade",
    "match",
    "meta",
    "mss_clamp_to_pmtu",
    "oifname",
    "payload",
    "prefix",
    "return_",
    "rt",
    "rule",
    "rule_text",
    "set_ref",
    "snat",
    "tcp_flags",
    "tcp_option",
    "udp_dport",
]

Expr = dict[str, Any]
"""One JSON object of an expression list (a statement or an operand)."""

MATCH_OPS = frozenset({"==", "!=", "in", "<", ">", "<=", ">="})


# --- operands: what a match looks at -------------------------------------------------------------


def payload(protocol: str, field: str) -> Expr:
    """A packet header field: ``ip saddr``, ``tcp flags``, ``udp dport``."""
    return {"payload": {"protocol": protocol, "field": field}}


def meta(key: str) -> Expr:
    """Packet metadata: ``iifname``, ``oifname``, ``mark``, ``l4proto``."""
    return {"meta": {"key": key}}


def ct(key: str) -> Expr:
    """Conntrack state: ``ct status``, ``ct state``, ``ct mark``."""
    return {"ct": {"key": key}}


def rt(key: str) -> Expr:
    """Routing data: ``rt mtu``."""
    return {"rt": {"key": key}}


def tcp_option(name: str, field: str) -> Expr:
    """A TCP option field: ``tcp option maxseg size``."""
    return {"tcp option": {"name": name, "field": field}}


def bitand(left: Expr, mask: Any) -> Expr:
    """``left & mask`` (a mask is an int, or a list of flag names for flag types)."""
    return {"&": [left, mask]}


def bitor(left: Expr, value: int) -> Expr:
    """``left | value`` (``meta mark | 0xc0000``: set bits, keep the others)."""
    return {"|": [left, value]}


def map_lookup(key: Expr, name: str) -> Expr:
    """``KEY map @name``: the value a named map holds for ``key`` (a miss ends the rule, nothing is done)."""
    return {"map": {"key": key, "data": set_ref(name)}}


def ip_saddr() -> Expr:
    return payload("ip", "saddr")


def ip_daddr() -> Expr:
    return payload("ip", "daddr")


# --- values: what an operand is compared with ----------------------------------------------------


def set_ref(name: str) -> str:
    """A named set of the same table: ``@name``."""
    if not name or name.startswith("@"):
        raise ValueError(f"set_ref: name {name!r} must be a bare, non-empty set name")
    return f"@{name}"


def prefix(net: IPv4Network | str) -> Expr | str:
    """An address or prefix, as nft prints it (a /32 is a plain address)."""
    network = IPv4Network(net)
    if network.prefixlen == network.max_prefixlen:
        return str(network.network_address)
    return {"prefix": {"addr": str(network.network_address), "len": network.prefixlen}}


def element_json(value: str) -> Expr | str:
    """A set element string (``10.1.1.1`` or ``10.1.0.0/16``) in nft's JSON shape."""
    return prefix(value)


def addr_range(first: IPv4Address | str, last: IPv4Address | str) -> Expr:
    """An address range ``first-last`` (for ``snat to A-B``)."""
    return {"range": [str(IPv4Address(first)), str(IPv4Address(last))]}


def anon_set(values: Iterable[Any]) -> Expr:
    """An anonymous set ``{ a, b }``. Numbers are sorted, as the kernel returns them.

    Beware: nft merges adjacent prefixes of an anonymous set (``{ 10.0.0.0/8,
    11.0.0.0/8 }`` reads back as ``{ 10.0.0.0/7 }``); use a named set for CIDRs.
    """
    items = list(values)
    if not items:
        raise ValueError("anon_set: values must not be empty (nft rejects an empty anonymous set)")
    if all(isinstance(v, int) for v in items):
        items = sorted(set(items))
    return {"set": items}


# --- statements ----------------------------------------------------------------------------------


def match(left: Expr, right: Any, op: str = "==") -> Expr:
    """``left op right``; nft omits ``==`` when it prints the rule."""
    if op not in MATCH_OPS:
        raise ValueError(f"match: op {op!r} is not one of {sorted(MATCH_OPS)}")
    return {"match": {"op": op, "left": left, "right": right}}


def flags_in(left: Expr, *names: str, negate: bool = False) -> Expr:
    """A flag match: ``ct status dnat``, ``ct state established,related`` (``!=`` if ``negate``)."""
    if not names:
        raise ValueError("flags_in: at least one flag name is required")
    right: Any = names[0] if len(names) == 1 else list(names)
    return match(left, right, "!=" if negate else "in")


def iifname(name: str, *, negate: bool = False) -> Expr:
    return match(meta("iifname"), name, "!=" if negate else "==")


def oifname(name: str, *, negate: bool = False) -> Expr:
    return match(meta("oifname"), name, "!=" if negate else "==")


def tcp_flags(value: str, mask: Sequence[str]) -> Expr:
    """``tcp flags VALUE / MASK`` (e.g. ``syn`` within ``syn,rst``)."""
    return match(bitand(payload("tcp", "flags"), list(mask)), value)


def udp_dport(ports: int | Iterable[int]) -> Expr:
    """``udp dport P`` or ``udp dport { P1, P2 }``."""
    right: Any = ports if isinstance(ports, int) else anon_set(ports)
    return match(payload("udp", "dport"), right)


def _nat(kind: str, addr: Expr | str | IPv4Address | None, port: int | None) -> Expr:
    body: dict[str, Any] = {}
    if addr is not None:
        body["addr"] = str(addr) if isinstance(addr, IPv4Address) else addr
    if port is not None:
        body["port"] = port
    if not body:
        raise ValueError(f"{kind}: give an addr, a port or both")
    return {kind: body}


def snat(addr: Expr | str | IPv4Address | None = None, port: int | None = None) -> Expr:
    """``snat to ADDR[:PORT]``; ``addr`` may be an expression (``ip_saddr()``) or a range."""
    return _nat("snat", addr, port)


def dnat(addr: Expr | str | IPv4Address | None = None, port: int | None = None) -> Expr:
    """``dnat to ADDR[:PORT]``."""
    return _nat("dnat", addr, port)


def masquerade() -> Expr:
    return {"masquerade": None}


def accept() -> Expr:
    return {"accept": None}


def drop() -> Expr:
    return {"drop": None}


def return_() -> Expr:
    return {"return": None}


def jump(target: str) -> Expr:
    return {"jump": {"target": target}}


def goto(target: str) -> Expr:
    return {"goto": {"target": target}}


def counter() -> Expr:
    """An anonymous counter, as a fresh rule reads back (zero packets and bytes)."""
    return {"counter": {"packets": 0, "bytes": 0}}


def mangle(key: Expr, value: Any) -> Expr:
    """``KEY set VALUE`` (``meta mark set 0x1``, ``tcp option maxseg size set rt mtu``)."""
    return {"mangle": {"key": key, "value": value}}


def mss_clamp_to_pmtu() -> Expr:
    """``tcp option maxseg size set rt mtu``: clamp the MSS to the route's MTU."""
    return mangle(tcp_option("maxseg", "size"), rt("mtu"))


# --- whole rules ---------------------------------------------------------------------------------


def canonical(exprs: Sequence[Expr]) -> str:
    """The canonical string of an expression list: ``json.dumps(list, sort_keys=True)``."""
    return json.dumps(list(exprs), sort_keys=True)


def rule(chain: str, *exprs: Expr, comment: str | None = None) -> NftRule:
    """An :class:`NftRule` of ``chain`` from statements, in order."""
    if not exprs:
        raise ValueError(f"rule: chain {chain!r} rule needs at least one statement")
    if comment is not None and len(comment.encode()) > 128:
        raise ValueError(f"rule: comment {comment!r} is longer than nft's 128 bytes")
    return NftRule(chain=chain, expr=canonical(exprs), comment=comment)
