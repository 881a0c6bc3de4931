"""FakeNft's element changes: ``delete element`` then ``add element`` on a stored table, refused as the kernel does.

Measured with ``NftDriver`` in a throwaway namespace (nft 1.0.6, kernel 6.18); the whole batch fails on any of:

- the table, or the set or map, does not exist: "No such file or directory";
- a deleted element is not in the set (an interval must be deleted exactly as it was added: an
  address or a smaller prefix inside it is "element does not exist"), or a deleted map key is not
  in the map: "No such file or directory". A map delete removes the key whatever value it names;
- an added map key is there with another value: "File exists" (with the same value: no change);
- pairs for a set ("set is not a map") or bare keys for a map ("Invalid argument").

An added element that is already in a set is no change. What the resulting table must satisfy
(no overlapping intervals, verdicts jumping to existing regular chains, no jump loop, canonical
elements) is checked by the caller on the whole new table, as for a replace.

Not modelled (``NOT_MODELLED``: set sizes): a constant set is sized at creation and the kernel
refuses growing it past that ("Too many open files in system"); the diff never sends element
changes for constant sets, it replaces the table.
"""

from __future__ import annotations

import attrs

from magw.desired.nft.values import NftMap, NftSet, NftTable
from magw.reconcile.nftdelta import MapDelta, NftElementDelta, SetDelta


class ElementRefused(Exception):
    """The kernel would refuse the batch; the message names the element and the cause in nft's words."""


def _set_with(s: NftSet, d: SetDelta) -> NftSet:
    if d.type != s.type:
        raise ElementRefused(f"EINVAL: set {s.name}: datatype mismatch, the set holds {s.type}, not {d.type}")
    have = set(s.elements)
    for item in d.delete:
        if item not in have:
            raise ElementRefused(f"ENOENT: set {s.name}: element {item} does not exist: No such file or directory")
        have.discard(item)
    have.update(d.add)
    return attrs.evolve(s, elements=have)


def _map_with(m: NftMap, d: MapDelta) -> NftMap:
    if (d.type, d.map) != (m.type, m.map):
        raise ElementRefused(
            f"EINVAL: map {m.name}: datatype mismatch, the map is {m.type} : {m.map}, not {d.type} : {d.map}"
        )
    have = dict(m.elements)
    for key, _ in d.delete:
        if have.pop(key, None) is None:
            raise ElementRefused(f"ENOENT: map {m.name}: element {key} does not exist: No such file or directory")
    for key, value in d.add:
        if have.setdefault(key, value) != value:
            raise ElementRefused(f"EEXIST: map {m.name}: element {key} is there with {have[key]}: File exists")
    return attrs.evolve(m, elements=have.items())


def with_elements(table: NftTable | None, family: str, name: str, delta: NftElementDelta) -> NftTable:
    """``table`` after the delta's deletes then adds; raises ElementRefused when the kernel refuses the batch."""
    if table is None:
        raise ElementRefused(f"ENOENT: table {family} {name}: No such file or directory")
    sets = {s.name: s for s in table.sets}
    maps = {m.name: m for m in table.maps}
    for sd in delta.sets:
        if sd.name in maps:
            raise ElementRefused(f"EINVAL: map {sd.name}: elements without values: Invalid argument")
        if sd.name not in sets:
            raise ElementRefused(f"ENOENT: set {sd.name}: No such file or directory")
        sets[sd.name] = _set_with(sets[sd.name], sd)
    for md in delta.maps:
        if md.name in sets:
            raise ElementRefused(f"EINVAL: set {md.name}: set is not a map")
        if md.name not in maps:
            raise ElementRefused(f"ENOENT: map {md.name}: No such file or directory")
        maps[md.name] = _map_with(maps[md.name], md)
    return attrs.evolve(table, sets=sets.values(), maps=maps.values())
