"""nftables values: one table of ours, with sets, maps, chains and rules.

Rule expressions are kept in libnftables JSON form (``libnftables-json(5)``), as a
canonical JSON string (``json.dumps(expr_list, sort_keys=True)``), written exactly
the way ``nft -j list`` prints them back. That way the desired state, the
fake's state and what the kernel reports compare as plain strings.
Set and map elements are strings: an address (``10.1.1.1``) or a prefix
(``10.1.0.0/16``); the driver converts them to and from nft's JSON shapes.
"""

from __future__ import annotations

import attrs

Family = str  # "ip", "ip6", "inet", ...


@attrs.frozen(kw_only=True)
class NftSet:
    name: str
    type: str
    flags: tuple[str, ...] = ()
    elements: tuple[str, ...] = attrs.field(default=(), converter=lambda v: tuple(sorted(set(v))))


@attrs.frozen(kw_only=True)
class NftMap:
    name: str
    type: str
    map: str
    flags: tuple[str, ...] = ()
    elements: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=lambda v: tuple(sorted(set(v))))


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
    """A whole table of ours. Rules keep their order (it matters within a chain)."""

    family: Family
    name: str
    sets: tuple[NftSet, ...] = attrs.field(default=(), converter=lambda v: tuple(sorted(v, key=lambda s: s.name)))
    maps: tuple[NftMap, ...] = attrs.field(default=(), converter=lambda v: tuple(sorted(v, key=lambda m: m.name)))
    chains: tuple[NftChain, ...] = attrs.field(default=(), converter=lambda v: tuple(sorted(v, key=lambda c: c.name)))
    rules: tuple[NftRule, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.family, self.name)
