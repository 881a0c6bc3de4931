"""Checks we run BEFORE a table reaches libnftables: shapes nft would crash on, misread, or accept silently.

Everything else (a dangling ``@set`` or ``jump``, a bad hook, NAT in a filter
chain) is left to the kernel, so the real driver's failures are the kernel's own
and the fake (``magw.drivers.nft.fake.ruleset``) has to match them. What we catch here,
measured on nft 1.0.6 / kernel 6.18:

- a map lookup whose data names a plain set (``snat to ip saddr map @a_set``):
  libnftables segfaults, which would kill our process;
- an element nft cannot parse as an address: nft looks it up as a HOST NAME (DNS);
- an element written differently from what the kernel prints back (``10.1.0.1/16``):
  the next observe would differ and the table would be replaced on every sync;
- a chain with ``type`` but no ``hook``/``priority``: created as a REGULAR chain,
  silently; ``policy`` on a regular chain: ignored, silently; a base chain without
  ``policy`` reads back as ``accept`` (so we require it);
- two sets (or chains) with the same name: the second ``add`` merges into the first.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from magw.desired.egressgw.plan import TABLE_NAME as EGRESSGW_TABLE
from magw.desired.nft.plan import TABLE_FAMILY, TABLE_NAME
from magw.desired.nft.refs import lookups
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.nft import elements
from magw.reconcile.changeset import NftChange

TableKey = tuple[str, str]
# The tables a node's drivers own: the route agent's ``ip magw`` (first: DesiredState.nft) and the egress
# gateway's ``ip magw-egress`` (DesiredState.extra_nft, magw.desired.egressgw). Owned means observed, replaced
# and, by ``magw cleanup``, deleted; nothing else is ever touched.
NODE_TABLES: tuple[TableKey, ...] = ((TABLE_FAMILY, TABLE_NAME), (TABLE_FAMILY, EGRESSGW_TABLE))

FAMILIES = ("ip", "ip6", "inet")
SET_FLAGS = ("constant", "dynamic", "interval", "timeout")
CHAIN_TYPES = ("filter", "nat", "route")
POLICIES = ("accept", "drop")
_NAME_MAX = 255


def _name_errors(what: str, name: str) -> list[str]:
    if not name or len(name.encode()) > _NAME_MAX:
        return [f"{what} name {name!r}: must be 1-{_NAME_MAX} bytes"]
    if any(ch.isspace() or ch in "\"'@;{}" for ch in name):
        return [f"{what} name {name!r}: no spaces, quotes, '@', ';' or braces"]
    return []


def _element_errors(what: str, items: tuple[str, ...], type_: str, interval: bool) -> list[str]:
    if type_ == "ipv4_addr" and elements.all_canonical_v4(items, interval):
        return []  # the usual case, checked in one pass; else each element is read and its error worded
    errors = []
    for item in items:
        try:
            canon = elements.canonical(item, type_, interval=interval)
        except elements.ElementError as exc:
            errors.append(f"{what}: {exc}")
            continue
        if canon != item:
            errors.append(f"{what}: element {item!r} must be written {canon!r} (the kernel prints it that way)")
    return errors


def _flag_errors(what: str, flags: tuple[str, ...]) -> list[str]:
    bad = [f for f in flags if f not in SET_FLAGS]
    return [f"{what} flags: unknown flag(s) {', '.join(bad)} (known: {', '.join(SET_FLAGS)})"] if bad else []


def set_errors(s: NftSet) -> list[str]:
    what = f"set {s.name}"
    errors = _name_errors("set", s.name) + _flag_errors(what, s.flags)
    try:
        elements.split_type(s.type)
    except elements.ElementError as exc:
        return [*errors, f"{what} type: {exc}"]
    return errors + _element_errors(what, s.elements, s.type, "interval" in s.flags)


def map_errors(m: NftMap) -> list[str]:
    what = f"map {m.name}"
    errors = _name_errors("map", m.name) + _flag_errors(what, m.flags)
    try:
        elements.split_type(m.type)
        elements.split_type(m.map, allow_verdict=True)
    except elements.ElementError as exc:
        return [*errors, f"{what} type: {exc}"]
    errors += _element_errors(what, tuple(k for k, _ in m.elements), m.type, "interval" in m.flags)
    errors += _element_errors(f"{what} value", tuple(v for _, v in m.elements), m.map, False)
    keys = Counter(k for k, _ in m.elements)
    errors += [f"{what}: key {k!r} has more than one value" for k, n in sorted(keys.items()) if n > 1]
    return errors


def chain_errors(c: NftChain) -> list[str]:
    what = f"chain {c.name}"
    errors = _name_errors("chain", c.name)
    base = (c.type, c.hook, c.priority)
    if any(v is not None for v in base) and any(v is None for v in base):
        errors.append(f"{what}: a base chain needs type, hook and priority together (nft would make a regular chain)")
    if c.type is not None and c.type not in CHAIN_TYPES:
        errors.append(f"{what} type: {c.type!r} is not one of {', '.join(CHAIN_TYPES)}")
    if c.hook is not None and c.policy is None:
        errors.append(f"{what} policy: a base chain needs accept or drop (the kernel always reports one)")
    if c.policy is not None:
        if c.hook is None:
            errors.append(f"{what} policy: only base chains have a policy (nft would ignore it)")
        elif c.policy not in POLICIES:
            errors.append(f"{what} policy: {c.policy!r} is not accept or drop")
    return errors


def parse_expr(rule: NftRule) -> list[Any]:
    """The rule's expression list; raises ValueError naming the rule when ``expr`` is not a JSON list."""
    try:
        expr = json.loads(rule.expr)
    except json.JSONDecodeError as exc:
        raise ValueError(f"rule in chain {rule.chain} expr: not JSON ({exc.msg})") from None
    if not isinstance(expr, list) or not all(isinstance(stmt, dict) for stmt in expr):
        raise ValueError(f"rule in chain {rule.chain} expr: must be a JSON list of statements")
    return expr


def rule_errors(rule: NftRule, sets: set[str], maps: dict[str, NftMap]) -> list[str]:
    try:
        expr = parse_expr(rule)
    except ValueError as exc:
        return [str(exc)]
    errors = []
    for kind, name in lookups(expr):
        if name in sets:
            errors.append(f"rule in chain {rule.chain}: {kind} lookup on @{name}, which is a set, not a map")
        elif name in maps and (kind == "vmap") != (maps[name].map == "verdict"):
            want = "a verdict map" if kind == "vmap" else "a map with values"
            errors.append(f"rule in chain {rule.chain}: {kind} lookup on @{name} needs {want}")
    return errors


def _duplicate_errors(table: NftTable) -> list[str]:
    names = Counter([s.name for s in table.sets] + [m.name for m in table.maps])
    chains = Counter(c.name for c in table.chains)
    return [f"set/map {n}: defined {k} times" for n, k in sorted(names.items()) if k > 1] + [
        f"chain {n}: defined {k} times" for n, k in sorted(chains.items()) if k > 1
    ]


def table_errors(table: NftTable) -> list[str]:
    """Every reason libnftables must not see ``table``; empty when it may be sent."""
    errors = []
    if table.family not in FAMILIES:
        errors.append(f"table {table.name} family: {table.family!r} is not one of {', '.join(FAMILIES)}")
    errors += _name_errors("table", table.name) + _duplicate_errors(table)
    for s in table.sets:
        errors += set_errors(s)
    for m in table.maps:
        errors += map_errors(m)
    for c in table.chains:
        errors += chain_errors(c)
    set_names = {s.name for s in table.sets}
    maps = {m.name: m for m in table.maps}
    for rule in table.rules:
        errors += rule_errors(rule, set_names, maps)
    return errors


def change_refusal(change: NftChange, owned: Iterable[TableKey]) -> str | None:
    """Why ``change`` must not run at all (not one of our tables, or a mismatched table), else None."""
    key = (change.family, change.name)
    if key not in tuple(owned):
        return f"refused: table {change.family} {change.name} is not one of ours"
    if change.table is not None and change.table.key != key:
        family, name = change.table.key
        return f"table: {family} {name} does not match the change's table {change.family} {change.name}"
    if change.elements is not None:
        return _delta_refusal(change)
    return None


def _delta_refusal(change: NftChange) -> str | None:
    """An element change must name the sets and maps of its table, with their types (it is sent as they are)."""
    if change.elements is None:
        return None
    if change.table is None:
        return f"elements: table {change.family} {change.name} is deleted by the same change"
    sets = {s.name: (s.type, "interval" in s.flags) for s in change.table.sets}
    maps = {m.name: (m.type, m.map, "interval" in m.flags) for m in change.table.maps}
    for d in change.elements.sets:
        if sets.get(d.name) != (d.type, d.interval):
            return f"elements: set {d.name} ({d.type}) is not a set of table {change.family} {change.name} as given"
    for m in change.elements.maps:
        if maps.get(m.name) != (m.type, m.map, m.interval):
            return f"elements: map {m.name} ({m.type} : {m.map}) is not a map of table {change.family} {change.name}"
    return None
