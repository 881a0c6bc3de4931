"""What nft and the kernel refuse in a table that preflight lets through: the fake's kernel model.

The real driver leaves these to the kernel; ``FakeNft`` runs them so it fails
where the kernel fails (tests/kernel/test_nft_contract.py runs the same cases against
both). Measured on nft 1.0.6 / kernel 6.18:

- a rule in a missing chain, a missing ``@set``, a ``jump``/``goto`` to a missing
  chain (also from a verdict-map element): ENOENT, the whole batch is refused;
- a jump to a base chain: EOPNOTSUPP;
- a hook the family does not have: "Invalid chain hook"; a nat chain on
  ``forward`` or a route chain off ``output``: EOPNOTSUPP;
- ``snat``/``masquerade``/``dnat``/``redirect`` outside a nat chain, or in a nat
  chain of a hook that does not allow it (snat: postrouting, input; masquerade:
  postrouting; dnat, redirect: prerouting, output): EOPNOTSUPP; a regular chain
  is checked against every base chain that reaches it;
- overlapping elements of an interval set: "conflicting intervals specified".

Jump loops, datatype mismatches, unknown statements and meta keys are in
``magw.drivers.nft.fake.checks``; what the fake does not model is
``magw.drivers.nft.fake.ruleset.NOT_MODELLED``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from magw.desired.nft.refs import chain_targets, nat_statements, set_refs
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.nft import elements
from magw.drivers.nft.preflight import parse_expr

HOOKS = ("prerouting", "input", "forward", "output", "postrouting")
TYPE_HOOKS = {
    "filter": HOOKS,
    "nat": ("prerouting", "input", "output", "postrouting"),
    "route": ("output",),
}
NAT_HOOKS = {
    "snat": ("postrouting", "input"),
    "masquerade": ("postrouting",),
    "dnat": ("prerouting", "output"),
    "redirect": ("prerouting", "output"),
}


def chain_errors(chain: NftChain) -> list[str]:
    if chain.hook is None or chain.type is None:
        return []
    if chain.hook not in HOOKS:
        return [f"EINVAL: chain {chain.name}: invalid chain hook {chain.hook!r}"]
    if chain.hook not in TYPE_HOOKS.get(chain.type, ()):
        return [f"EOPNOTSUPP: chain {chain.name}: a {chain.type} chain cannot hook {chain.hook}"]
    return []


def _overlaps(what: str, items: Iterable[str], type_: str) -> list[str]:
    spans = sorted(s for s in (elements.bounds(i, type_) for i in items) if s is not None)
    return [
        f"EINVAL: {what}: conflicting intervals specified" for (_, hi), (lo, _) in itertools.pairwise(spans) if lo <= hi
    ][:1]


def interval_errors(sets: Iterable[NftSet], maps: Iterable[NftMap]) -> list[str]:
    errors = []
    for s in sets:
        if "interval" in s.flags and " . " not in s.type:
            errors += _overlaps(f"set {s.name}", s.elements, s.type)
    for m in maps:
        if "interval" in m.flags and " . " not in m.type:
            errors += _overlaps(f"map {m.name}", (k for k, _ in m.elements), m.type)
    return errors


def _jumps(table: NftTable) -> dict[str, set[str]]:
    """Chain -> chains it jumps to (from its rules and from verdict maps its rules use)."""
    vmaps = {m.name: {v.split()[1] for _, v in m.elements if v.split()[0] in ("jump", "goto")} for m in table.maps}
    out: dict[str, set[str]] = {c.name: set() for c in table.chains}
    for rule in table.rules:
        expr = parse_expr(rule)
        targets = chain_targets(expr) | {t for name in set_refs(expr) for t in vmaps.get(name, ())}
        out.setdefault(rule.chain, set()).update(targets)
    return out


def _reaching_hooks(table: NftTable) -> dict[str, set[tuple[str, str]]]:
    """Chain -> the (type, hook) of every base chain from which it is reached."""
    jumps = _jumps(table)
    reach: dict[str, set[tuple[str, str]]] = {c.name: set() for c in table.chains}
    bases = [(c.name, c.type, c.hook) for c in table.chains if c.hook is not None and c.type is not None]
    for base_name, ctype, hook in bases:
        seen, todo = set(), [base_name]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            reach.setdefault(name, set()).add((ctype, hook))
            todo.extend(jumps.get(name, ()))
    return reach


def _reference_errors(rule: NftRule, chains: dict[str, NftChain], named: set[str]) -> list[str]:
    where = f"rule in chain {rule.chain}"
    if rule.chain not in chains:
        return [f"ENOENT: {where}: no such chain"]
    expr = parse_expr(rule)
    errors = [f"ENOENT: {where}: no set or map @{n}" for n in sorted(set_refs(expr) - named)]
    for target in sorted(chain_targets(expr)):
        if target not in chains:
            errors.append(f"ENOENT: {where}: jump to missing chain {target}")
        elif chains[target].hook is not None:
            errors.append(f"EOPNOTSUPP: {where}: jump to base chain {target}")
    return errors


def _map_target_errors(table: NftTable, chains: dict[str, NftChain]) -> list[str]:
    errors = []
    for m in table.maps:
        for key, value in m.elements:
            verb, *target = value.split()
            if verb not in ("jump", "goto"):
                continue
            if target[0] not in chains:
                errors.append(f"ENOENT: map {m.name} element {key}: jump to missing chain {target[0]}")
            elif chains[target[0]].hook is not None:
                errors.append(f"EOPNOTSUPP: map {m.name} element {key}: jump to base chain {target[0]}")
    return errors


def _nat_errors(rule: NftRule, reach: dict[str, set[tuple[str, str]]]) -> list[str]:
    errors = []
    for stmt in nat_statements(parse_expr(rule)):
        for ctype, hook in sorted(reach.get(rule.chain, ())):
            if ctype != "nat" or hook not in NAT_HOOKS[stmt]:
                errors.append(f"EOPNOTSUPP: rule in chain {rule.chain}: {stmt} not allowed in a {ctype} {hook} chain")
    return errors


def table_errors(table: NftTable) -> list[str]:
    """What nft or the kernel would refuse in ``table`` (after preflight passed)."""
    errors = [e for c in table.chains for e in chain_errors(c)]
    errors += interval_errors(table.sets, table.maps)
    chains = {c.name: c for c in table.chains}
    named = {s.name for s in table.sets} | {m.name for m in table.maps}
    for rule in table.rules:
        errors += _reference_errors(rule, chains, named)
    errors += _map_target_errors(table, chains)
    if not errors:  # reachability needs every reference resolved
        reach = _reaching_hooks(table)
        for rule in table.rules:
            errors += _nat_errors(rule, reach)
    return errors
