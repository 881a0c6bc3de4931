"""A snapshot parser that remembers: re-parsing a clusterset where little changed costs what changed.

Shaped for speed (docs/performance.md). The file broker re-assembles the whole snapshot after any change, and at
100k CIDRs over 100 clusters a rescan after a gateway was added took 1.4-1.7 s, nearly all of it
re-parsing the unchanged Cluster documents (``cidr_list``, ``ipaddress``, ``model._nets``) and
re-running the overlap check over every CIDR. ``SnapshotParser`` is a drop-in ``parse_snapshot``
(the ``Parse`` of ``magw.sources.file.assemble``) that

- reuses the parsed Cluster (Node, Endpoint) of an item equal to one it parsed before: the new Snapshot
  holds the very same ``Cluster`` object (``is``), which the incremental planner relies on to skip
  unchanged clusters (1.4-1.7 s -> 4 ms for that rescan);
- likewise reuses the parsed Globalnet pods (``magw.snapshot.globalnet.CACHED_SECTIONS``): of 100k pods, the ones
  that did not change are the very objects of the last snapshot, which the Globalnet gateway's incremental
  planner finds by identity (``magw.desired.globalnet.incremental``);
- skips the subnet check of an (endpoint, cluster) pair of objects that passed it before;
- skips the overlap check for a list of clusters that all were in the last list that passed (whether a
  list passes is a property of its pairs, so any sub-list passes too), and checks only the ranges of new
  clusters against a kept index of the others otherwise;
- reports exactly what ``parse_snapshot`` reports: a reused cluster gets its new position's path, and when
  the index finds an overlap the full check runs to word the error as it always did.

Memory is bounded: ``collect()`` (the source calls it after each pass) forgets the entries no parse used
since the previous ``collect()``; without it at most two versions per item name and 65536 checked
(endpoint, cluster) pairs are kept.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import attrs

from magw.model import Cluster, Endpoint, Snapshot, net_key
from magw.snapshot.checks import (
    OverlapCheck,
    ParsedCluster,
    ParsedEndpoint,
    SubnetCheck,
    SubnetChecker,
    check_overlaps,
)
from magw.snapshot.load import parse_snapshot

_NETMASKS = tuple((0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF for length in range(33))
_PER_ID = 2  # versions kept per item name between collects: the walk tries a changed one and its last good one
# New clusters holding more than this share of all ranges are checked by the full check (a first scan).
_INCREMENTAL_SHARE = 8

Key = tuple[int, int]
_MAX_PAIRS = 1 << 16
_T = TypeVar("_T")
_NAME = {"clusters": "id", "nodes": "name", "endpoints": "hostname"}  # what tells items of a section apart


@attrs.define
class _CacheEntry:
    # The item as parse_snapshot saw it. Documents' fields are never mutated (the file broker and the Kubernetes
    # source build new ones for new content), so an entry whose raw item ``is`` or equals the new one holds
    # its parse (``_same``).
    raw: dict[object, object]
    parsed: object  # a ParsedCluster, Node or ParsedEndpoint
    used: int


def _same(raw: dict[object, object], value: dict[object, object]) -> bool:
    """``value`` is the item ``raw`` was. The sources copy each item's mapping (not its lists) for every parse,
    so ``==`` mostly meets the very same lists and strings and costs O(keys). ``==`` alone would take
    ``gateway: 1`` for ``gateway: true`` (``1 == True``): the top-level values must have the same types too;
    inside lists a valid item holds strings only, and a string equals only a string."""
    return raw == value and all(type(v) is type(value[k]) for k, v in raw.items())


def _item_name(section: str, value: object) -> str | None:
    """What tells ``value`` apart from the other items of its section; None when it has no such name."""
    if not isinstance(value, dict):
        return None
    if section.startswith("globalnet."):  # namespaced objects (magw.snapshot.globalnet.CACHED_SECTIONS)
        namespace, name = value.get("namespace"), value.get("name")
        return f"{namespace}/{name}" if isinstance(namespace, str) and isinstance(name, str) else None
    name = value.get(_NAME[section])
    return name if isinstance(name, str) else None


class SnapshotParser:
    """``parse_snapshot`` with memory of the previous parses; call it as ``parser(doc, source=...)``.

    Not thread-safe: one per source, called by one pass at a time (both sources hold their lock).
    """

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], list[_CacheEntry]] = {}  # (section, id/name/hostname) -> newest first
        self._generation = 0
        self._overlaps = _OverlapMemo()
        self._subnets = _SubnetMemo()

    def __call__(self, doc: object, *, source: str = "<snapshot>") -> Snapshot:
        return parse_snapshot(doc, source=source, cache=self)

    def item(self, section: str, value: object, path: str, parse: Callable[[object, str], _T]) -> _T:
        name = _item_name(section, value)
        if not isinstance(value, dict) or name is None:
            return parse(value, path)  # it will not parse: let the parser word why
        entries = self._items.setdefault((section, name), [])
        for entry in entries:
            if entry.raw is value or _same(entry.raw, value):
                entry.used = self._generation
                return cast(_T, entry.parsed)  # stored by this method for this section: a _T
        parsed = parse(value, path)  # raises for a bad item: only good ones are remembered
        entries.insert(0, _CacheEntry(raw=value, parsed=parsed, used=self._generation))
        del entries[_PER_ID:]
        return parsed

    @property
    def check_overlaps(self) -> OverlapCheck:
        return self._overlaps

    @property
    def check_subnets(self) -> SubnetCheck:
        return self._subnets

    def collect(self) -> None:
        """Forget the clusters no parse used since the previous ``collect()``."""
        now = self._generation
        self._items = {
            key: kept for key, entries in self._items.items() if (kept := [e for e in entries if e.used == now])
        }
        self._generation += 1
        self._subnets.collect()

    @property
    def cached_items(self) -> int:
        """How many parsed items are remembered (for tests of the bound)."""
        return sum(len(entries) for entries in self._items.values())


class _SubnetMemo:
    """``SubnetChecker`` that skips an (endpoint, cluster) pair of objects that passed before: the verdict
    depends on those two values only. With Submariner-style endpoints, which publish their cluster's CIDRs as
    subnets, checking 100k subnets again was 0.2 s of a rescan after a gateway change (2 s with one bad
    document). ``collect()`` keeps the pairs and holders used since the previous one."""

    def __init__(self) -> None:
        self._checker = SubnetChecker()
        self._passed: dict[tuple[int, int], tuple[Endpoint, Cluster]] = {}  # the objects keep the ids unique
        self._used: dict[tuple[int, int], tuple[Endpoint, Cluster]] = {}

    def __call__(self, parsed: ParsedEndpoint, cluster: Cluster) -> None:
        key = (id(parsed.endpoint), id(cluster))
        hit = self._passed.get(key)
        if hit is None or hit[0] is not parsed.endpoint or hit[1] is not cluster:
            self._checker(parsed, cluster)  # raises for a bad subnet: only passes are remembered
            if len(self._passed) >= _MAX_PAIRS:  # never collected: start again rather than grow
                self._passed.clear()
            hit = self._passed[key] = (parsed.endpoint, cluster)
        self._used[key] = hit

    def collect(self) -> None:
        self._passed, self._used = self._used, {}
        self._checker.keep({id(cluster) for _, cluster in self._passed.values()})


class _OverlapMemo:
    """``check_overlaps`` that remembers the last list of clusters that passed and an index of its ranges."""

    def __init__(self) -> None:
        self._passed: dict[int, Cluster] = {}  # id -> the object (the reference keeps the id unique)
        self._index: _RangeIndex | None = None  # of the passed clusters; None when they have global CIDRs

    def __call__(self, clusters: Sequence[ParsedCluster]) -> None:
        new = [c for c in clusters if self._passed.get(id(c.cluster)) is not c.cluster]
        if not new:
            return  # all of them passed together before: so do they now
        total = sum(len(c.cluster.cidrs) for c in clusters)
        added = sum(len(c.cluster.cidrs) for c in new)
        incremental = (
            self._index is not None
            and added * _INCREMENTAL_SHARE <= total
            and not any(c.cluster.global_cidrs for c in clusters)
        )
        if incremental and self._index is not None:
            live = {id(c.cluster) for c in clusters}
            if not self._index.overlaps_any([c.cluster for c in new], live):
                self._index.update(live, [c.cluster for c in new])
                self._passed = {id(c.cluster): c.cluster for c in clusters}
                return
        check_overlaps(clusters)  # raises with the error the full check words; a first scan passes here
        self._passed = {id(c.cluster): c.cluster for c in clusters}
        globalnet = any(c.cluster.global_cidrs for c in clusters)
        self._index = None if globalnet else _RangeIndex([c.cluster for c in clusters])


class _RangeIndex:
    """The ranges of clusters that do not overlap each other, to ask "does a new range overlap one?" in
    O(log n): exact ``(network, prefixlen)`` keys for the ranges holding it (one lookup per prefix length
    present) and a sorted list of keys for the ranges it holds (a bisect)."""

    def __init__(self, clusters: Sequence[Cluster]) -> None:
        self.owner: dict[Key, Cluster] = {}
        self.keys: dict[int, list[Key]] = {}  # id(cluster) -> its keys, to take them out again
        self.lengths: Counter[int] = Counter()
        for cluster in clusters:
            self._add(cluster)
        self.sorted: list[Key] = sorted(self.owner)

    def _add(self, cluster: Cluster) -> list[Key]:
        keys = [net_key(n) for n in cluster.cidrs]
        for key in keys:
            self.owner[key] = cluster
        self.lengths.update(plen for _, plen in keys)
        self.keys[id(cluster)] = keys
        return keys

    def overlaps_any(self, new: Sequence[Cluster], live: set[int]) -> bool:
        """True when a range of a ``new`` cluster overlaps a range of another cluster of ``live`` (ids)."""
        fresh = _RangeIndex(new)  # the new clusters against each other too
        for index in (self, fresh):
            lengths = sorted(index.lengths)
            for cluster in new:
                for net in cluster.cidrs:
                    if index.overlap(net_key(net), cluster, live, lengths):
                        return True
        return False

    def overlap(self, key: Key, mine: Cluster, live: set[int], lengths: Sequence[int]) -> bool:
        start, plen = key
        for length in lengths:  # indexed ranges holding (or equal to) this one
            if length > plen:
                break
            other = self.owner.get((start & _NETMASKS[length], length))
            if other is not None and other is not mine and id(other) in live:
                return True
        end = start | (~_NETMASKS[plen] & 0xFFFFFFFF)
        lo = bisect.bisect_left(self.sorted, (start, plen + 1))
        hi = bisect.bisect_right(self.sorted, (end, 33))
        for inner in self.sorted[lo:hi]:  # indexed ranges strictly inside this one
            other = self.owner[inner]
            if other is not mine and id(other) in live:
                return True
        return False

    def update(self, live: set[int], new: Sequence[Cluster]) -> None:
        """Now index the clusters of ``live``: drop the others, add ``new`` (which overlap none of them)."""
        gone = [cid for cid in self.keys if cid not in live]
        dropped: set[Key] = set()
        for cid in gone:
            keys = self.keys.pop(cid)
            for key in keys:
                del self.owner[key]
            self.lengths.subtract(plen for _, plen in keys)
            dropped.update(keys)
        self.lengths = +self.lengths  # no zero counts: ``lengths`` lists the lengths present
        added = [key for cluster in new for key in self._add(cluster)]
        kept = [key for key in self.sorted if key not in dropped] if dropped else self.sorted
        self.sorted = sorted(kept + added)  # two sorted runs: timsort merges them in linear C time
