"""nftables values: one table of ours, with sets, maps, chains and rules.

Rule expressions are kept in libnftables JSON form (``libnftables-json(5)``), as a
canonical JSON string (``json.dumps(expr_list, sort_keys=True)``), written exactly
the way ``nft -j list`` prints them back. That way the desired state, the
fake's state and what the kernel reports compare as plain strings.
Set and map elements are strings: an address (``10.1.1.1``) or a prefix
(``10.1.0.0/16``); the driver converts them to and from nft's JSON shapes.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

Family = str  # "ip", "ip6", "inet", ...


def _sorted_flags(value: Iterable[str]) -> tuple[str, ...]:
    """Set flags are a set; nft prints them in a fixed order, we keep them sorted."""
    return tuple(sorted(set(value)))


def _rules_by_chain(value: Iterable[NftRule]) -> tuple[NftRule, ...]:
    return tuple(sorted(value, key=lambda r: r.chain))


class SortedElements(tuple[str, ...]):
    """Set elements already sorted and without repeats, which ``NftSet`` takes as they are (as ``SortedPairs``
    for maps): the nft driver's raw observe sorts in short steps (``magw.util.gentlesort``) so that no one sort
    holds the GIL for long."""

    __slots__ = ()


def _sorted_elements(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, SortedElements):
        return value
    return tuple(sorted(set(value)))


class SortedPairs(tuple[tuple[str, str], ...]):
    """Map elements already sorted and without repeats, which ``NftMap`` takes as they are.

    Shaped for speed (docs/performance.md, row 22b): sorting a Globalnet gateway's 100k ``gn_egress`` elements
    again for every plan was a third of it. Only a planner that keeps its pairs sorted builds one
    (``magw.desired.globalnet``)."""

    __slots__ = ()


def _sorted_pairs(value: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    if isinstance(value, SortedPairs):
        return value
    return tuple(sorted(set(value)))


def _sets_by_name(value: Iterable[NftSet]) -> tuple[NftSet, ...]:
    return tuple(sorted(value, key=lambda s: s.name))


def _maps_by_name(value: Iterable[NftMap]) -> tuple[NftMap, ...]:
    return tuple(sorted(value, key=lambda m: m.name))


def _chains_by_name(value: Iterable[NftChain]) -> tuple[NftChain, ...]:
    return tuple(sorted(value, key=lambda c: c.name))


@attrs.frozen(kw_only=True)
class NftSet:
    name: str
    type: str
    flags: tuple[str, ...] = attrs.field(default=(), converter=_sorted_flags)
    elements: tuple[str, ...] = attrs.field(default=(), converter=_sorted_elements)


@attrs.frozen(kw_only=True)
class NftMap:
    name: str
    type: str
    map: str
    flags: tuple[str, ...] = attrs.field(default=(), converter=_sorted_flags)
    elements: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_sorted_pairs)


@attrs.frozen(kw_only=True)
class NftChain:
    """A chain; ``type``/``hook``/``priority``/``policy`` are set for base chains only."""

    name: str
    type: str | None = None
    hook: str | None = None
    priority: int | None = None
    policy: str | None = None


@attrs.frozen(kw_only=True)
class NftRule:
    """A rule of ``chain``. ``expr`` is the canonical JSON of its expression list."""

    chain: str
    expr: str
    comment: str | None = None


@attrs.frozen(kw_only=True)
class NftTable:
    """A whole table of ours. Rules keep their order within a chain (it matters there).

    Rules are grouped by chain, chains in name order (a stable sort): the order
    across chains means nothing to the kernel, and ``nft list`` prints rules
    grouped by chain, so a planned table and the kernel's read-back compare equal.
    """

    family: Family
    name: str
    sets: tuple[NftSet, ...] = attrs.field(default=(), converter=_sets_by_name)
    maps: tuple[NftMap, ...] = attrs.field(default=(), converter=_maps_by_name)
    chains: tuple[NftChain, ...] = attrs.field(default=(), converter=_chains_by_name)
    rules: tuple[NftRule, ...] = attrs.field(default=(), converter=_rules_by_chain)

    @property
    def key(self) -> tuple[str, str]:
        return (self.family, self.name)
