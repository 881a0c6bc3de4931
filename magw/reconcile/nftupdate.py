"""A table change made in place: what to flush, delete and add so the kernel's table becomes the desired one.

Why not delete the table and add it again (docs/nft-driver.md, "Changing a table in place"): in one transaction that
replace is atomic per chain, not per packet, and two things in it let packets through no rule set at all, measured
on kernel 6.18:

- The new table's base chains are hooked when the transaction is prepared, with no rules yet, and the old ones stay
  hooked until the commit; a packet between the two at the moment of the commit sees the new chain still empty and
  the old chain already empty.
- An interval set created in the transaction reads empty to packets from the generation flip until the set's own
  commit, a little later: the new rules run, but ``ip saddr @remote_cidrs`` matches nothing.

Globalnet's stateless rewrites (``ip daddr set ip daddr map @gn_in``) are one rule each, so a packet that misses
them is lost: the rolling upgrade test, where each new route agent changes its table's rules, lost one UDP datagram
in about half of its CI runs, and at 8,000 datagrams/s through such a rewrite a replace lost about 9-11 per 100
changes (benchmarks/nft_update_window.py, docs/performance.md row 40). A new connection that missed the mark of
``prerouting-mark`` would even keep a null NAT binding, unSNATed for its life.

In place, a chain whose definition and rules are the same is not touched, a chain whose rules changed is flushed
and gets its rules again (its rules change at the flip, all together), and a set or map of the same name, type and
flags keeps its kernel object: only its changed elements go, and its other elements never stop matching.

What is still deleted and added: a chain whose type, hook, priority or policy changed, and a set or map whose type
or flags changed (or a ``constant`` one whose elements changed); a chain whose rules name such a set is flushed
with it. A chain that is deleted or redefined while a rule or a verdict map jumps to it makes ``table_update``
return None: the caller replaces the whole table (our planners write no jumps).

Pure: the diff computes the update from the observed and the desired table; the nft driver sends it as one
transaction (``magw.drivers.nft.updatecmds``) and falls back to the whole replace if the kernel
refuses it (the observed table was stale).
"""

from __future__ import annotations

import json

import attrs

from magw.desired.nft.refs import chain_targets, set_refs
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.reconcile.nftdelta import CONSTANT, NftElementDelta, map_delta, set_delta


@attrs.frozen(kw_only=True)
class TableUpdate:
    """What one in-place change flushes, deletes and adds (``magw.drivers.nft.updatecmds`` sends it in this order)."""

    flush: tuple[str, ...] = ()  # kept chains whose rules change: flushed, their rules added again
    delete_chains: tuple[str, ...] = ()
    delete_sets: tuple[str, ...] = ()
    delete_maps: tuple[str, ...] = ()
    elements: NftElementDelta = attrs.field(factory=NftElementDelta)  # the kept sets and maps: changed elements
    add_chains: tuple[NftChain, ...] = ()
    add_sets: tuple[NftSet, ...] = ()
    add_maps: tuple[NftMap, ...] = ()
    rules: tuple[NftRule, ...] = ()  # every rule of the flushed and the added chains, in the table's order

    def describe(self) -> str:
        """``flush 2 chains, -1 chain, +1 chain, +1 set, +2 -1 elements (...), 5 rules``: counts for the logs."""
        parts = [
            _count("flush", len(self.flush), "chain"),
            _count("-", len(self.delete_chains), "chain"),
            _count("-", len(self.delete_sets) + len(self.delete_maps), "set"),
            _count("+", len(self.add_chains), "chain"),
            _count("+", len(self.add_sets) + len(self.add_maps), "set"),
            self.elements.describe() if self.elements else "",
            _count("", len(self.rules), "rule"),
        ]
        return ", ".join(p for p in parts if p) or "nothing"


def _count(sign: str, n: int, what: str) -> str:
    if not n:
        return ""
    space = " " if sign.isalpha() else ""
    return f"{sign}{space}{n} {what}{'' if n == 1 else 's'}"


def table_update(desired: NftTable, observed: NftTable) -> TableUpdate | None:
    """The in-place change that turns ``observed`` into ``desired``; None when only a whole replace will do (another
    table, or a deleted or redefined chain that something jumps to)."""
    if desired.key != observed.key:
        return None
    want_chains = {c.name: c for c in desired.chains}
    have_chains = {c.name: c for c in observed.chains}
    gone_chains = {n for n, c in have_chains.items() if want_chains.get(n) != c}  # deleted or redefined
    if gone_chains and _jumped_to(observed, gone_chains):
        return None

    want_sets, have_sets = {s.name: s for s in desired.sets}, {s.name: s for s in observed.sets}
    want_maps, have_maps = {m.name: m for m in desired.maps}, {m.name: m for m in observed.maps}
    gone_sets = sorted(n for n, s in have_sets.items() if n not in want_sets or not _same_set(want_sets[n], s))
    gone_maps = sorted(n for n, m in have_maps.items() if n not in want_maps or not _same_map(want_maps[n], m))

    want_rules, have_rules = _rules_by_chain(desired), _rules_by_chain(observed)
    gone = {*gone_sets, *gone_maps}
    flush = sorted(
        name
        for name in have_chains.keys() & want_chains.keys()
        if name not in gone_chains
        and (want_rules.get(name, ()) != have_rules.get(name, ()) or _names_any(have_rules.get(name, ()), gone))
    )
    redo = set(flush) | {n for n in want_chains if n not in have_chains or n in gone_chains}
    return TableUpdate(
        flush=tuple(flush),
        delete_chains=tuple(sorted(gone_chains)),
        delete_sets=tuple(gone_sets),
        delete_maps=tuple(gone_maps),
        elements=_kept_elements(desired, have_sets, have_maps),
        add_chains=tuple(c for c in desired.chains if c.name in redo and c.name not in flush),
        add_sets=tuple(s for s in desired.sets if s.name not in have_sets or s.name in gone_sets),
        add_maps=tuple(m for m in desired.maps if m.name not in have_maps or m.name in gone_maps),
        rules=tuple(r for r in desired.rules if r.chain in redo),
    )


def _rules_by_chain(table: NftTable) -> dict[str, tuple[NftRule, ...]]:
    out: dict[str, list[NftRule]] = {}
    for r in table.rules:
        out.setdefault(r.chain, []).append(r)
    return {k: tuple(v) for k, v in out.items()}


def _names_any(rules: tuple[NftRule, ...], names: set[str]) -> bool:
    """Whether one of ``rules`` uses a set or map of ``names``."""
    return bool(names) and any(set_refs(json.loads(r.expr)) & names for r in rules)


def _jumped_to(table: NftTable, chains: set[str]) -> bool:
    """Whether a rule's jump or goto, or a verdict map's value, names one of ``chains``."""
    if any(chain_targets(json.loads(r.expr)) & chains for r in table.rules):
        return True
    verdicts = {v.split()[1] for m in table.maps for _k, v in m.elements if v.split()[0] in ("jump", "goto")}
    return bool(verdicts & chains)


def _same_set(want: NftSet, have: NftSet) -> bool:
    """Kept as the same kernel object: the same type and flags (a ``constant`` one also the same elements)."""
    return (want.type, want.flags) == (have.type, have.flags) and (
        CONSTANT not in want.flags or want.elements == have.elements
    )


def _same_map(want: NftMap, have: NftMap) -> bool:
    return (want.type, want.map, want.flags) == (have.type, have.map, have.flags) and (
        CONSTANT not in want.flags or want.elements == have.elements
    )


def _kept_elements(desired: NftTable, have_sets: dict[str, NftSet], have_maps: dict[str, NftMap]) -> NftElementDelta:
    """The element changes of the sets and maps that stay the same kernel objects."""
    sets = []
    for s in desired.sets:
        have = have_sets.get(s.name)
        if have is not None and _same_set(s, have) and s.elements != have.elements:
            sets.append(set_delta(s, have))
    maps = []
    for m in desired.maps:
        hmap = have_maps.get(m.name)
        if hmap is not None and _same_map(m, hmap) and m.elements != hmap.elements:
            maps.append(map_delta(m, hmap))
    return NftElementDelta(sets=tuple(sets), maps=tuple(maps))
