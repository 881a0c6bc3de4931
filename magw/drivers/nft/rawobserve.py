"""Observe one table as a terse ruleset listing plus our own element dumps, consistent by the ruleset generation.

Shaped for speed and for the threads beside it (docs/nft-driver.md, "Observing without libnftables' element
listing"): ``nft -j list table`` of a 100k-element table costs libnftables 2-3 s and 135 MB, and its 5-10 MB of
JSON are parsed by one ``json.loads`` call that holds the GIL for 0.4-0.8 s. Here libnftables lists the
ruleset without named sets' elements (10 ms, a few kB for our tables) and each set's elements come from an
``NFT_MSG_GETSETELEM`` dump that ``nfdump`` decodes message by message.

The reads are several, so they are made one snapshot by the ruleset's generation id: read before and after;
when a transaction was committed in between, everything is read again (``ATTEMPTS`` times at most, then the
caller lists the table with libnftables, one read). Only a table whose every set and map ``nfdump`` reads
(IPv4 keys and values, no flag but ``interval`` and ``constant``, a family of ``nfelems.FAMILIES``) is read
so; for any other the answer is False and the caller lists the table as before.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import attrs

from magw.desired.nft.values import NftTable, SortedElements, SortedPairs
from magw.drivers.nft import codec, nfdump
from magw.drivers.nft.libnft import Nft
from magw.drivers.nft.nfelems import FAMILIES, list_head
from magw.drivers.nft.nfnl import NfnlSocket
from magw.util.gentlesort import sorted_in_steps

ATTEMPTS = 3
_V4 = "ipv4_addr"
_READ_FLAGS = {"interval", "constant"}


def readable(table: NftTable) -> bool:
    """Whether ``nfdump`` reads every set and map of ``table``."""
    if table.family not in FAMILIES:
        return False
    if any(s.type != _V4 or not set(s.flags) <= _READ_FLAGS for s in table.sets):
        return False
    return all(m.type == _V4 and m.map == _V4 and set(m.flags) <= _READ_FLAGS for m in table.maps)


def _exists(doc: dict[str, Any], family: str, name: str) -> bool:
    for item in doc.get("nftables", ()):
        body = item.get("table") if isinstance(item, dict) else None
        if isinstance(body, dict) and (body.get("family"), body.get("name")) == (family, name):
            return True
    return False


def _elements(nfnl: NfnlSocket, family: str, table: str, name: str) -> list[nfdump.Element]:
    return nfdump.kernel_elements(nfnl.dump(nfdump.GETSETELEM, list_head(family, table, name)))


def _filled(nfnl: NfnlSocket, shape: NftTable) -> NftTable:
    """``shape`` with every set's and map's elements, sorted in short steps (``gentlesort``: the point of this
    read is that no step holds the GIL for long; ``NftSet``/``NftMap`` take the sorted tuples as they are)."""
    sets = []
    for s in shape.sets:
        found = nfdump.set_strings(_elements(nfnl, shape.family, shape.name, s.name), interval="interval" in s.flags)
        sets.append(attrs.evolve(s, elements=SortedElements(sorted_in_steps(found))))
    maps = []
    for m in shape.maps:
        pairs = nfdump.map_pairs(_elements(nfnl, shape.family, shape.name, m.name), interval="interval" in m.flags)
        maps.append(attrs.evolve(m, elements=SortedPairs(sorted_in_steps(pairs))))
    return attrs.evolve(shape, sets=sets, maps=maps)


def observe_raw(nft: Nft, nfnl: NfnlSocket, family: str, name: str) -> NftTable | Literal[False] | None:
    """The table ``family name`` as ``NftDriver.observe_table`` gives it; None when it does not exist; False
    when it cannot be read so (a set or map ``nfdump`` does not read, or the ruleset kept changing)."""
    for _ in range(ATTEMPTS):
        generation = nfnl.generation()
        text = nft.list_ruleset_terse()
        doc = json.loads(text) if text.strip() else {}
        del text
        if not _exists(doc, family, name):
            found: NftTable | None = None
        else:
            shape = codec.parse_table(doc, family, name)
            if not readable(shape):
                return False
            found = _filled(nfnl, shape)
        if nfnl.generation() == generation:
            return found
    return False

