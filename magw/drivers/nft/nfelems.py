"""An element change as nfnetlink messages, packed by hand: what ``nft add/delete element`` sends, without its cache.

Why (docs/performance.md, row 18f): nft 1.0.6 reads every element of every interval set in the namespace into its
cache before it adds or deletes ONE element anywhere (measured: 1.5-2.4 s to add an address to a small set beside a
100k-prefix ``remote_cidrs`` set, also when the small set is in another table), so every node joining or leaving
the local cluster cost a route agent 2 s, and events behind it waited. The kernel itself needs no such read: it
checks overlaps and missing elements on its own, inside the transaction. So for the element changes we can write
ourselves, ``NftDriver`` sends these messages (``nfnl.NfnlSocket``) instead of libnftables' commands.

What is written here (anything else goes through libnftables as before; ``expressible`` says which):

- sets of ``ipv4_addr``, with or without ``interval``, and maps ``ipv4_addr : ipv4_addr`` (interval too); no other
  set flag (``timeout``, ``dynamic``, ``constant``);
- the tables of families ``ip``, ``ip6`` and ``inet``.

The messages, as ``nft --debug=netlink add element`` shows nft 1.0.6 sending them (kernel 6.18)::

    NFT_MSG_DELSETELEM  table, set, elements: [key]                 # every delete first (nftdelta's order)
    NFT_MSG_NEWSETELEM  table, set, elements: [key (, data)]        # then every add; no NLM_F_EXCL

An interval element ``[a, b)`` is two kernel elements: ``a`` (flags 0; a map's value rides on it) and ``b`` with
``NFT_SET_ELEM_INTERVAL_END``. An interval reaching 255.255.255.255 has no end element; nft marks its start with the
user-data flag ``NFTNL_SET_ELEM_F_INTERVAL_OPEN``, and so do we (nft 1.0.6 lists such an interval the same without
it; later versions may read it). Deleting an
interval deletes the same one or two elements; an interval that is not there exactly is ENOENT, one that overlaps
another is refused by the kernel (ENOTEMPTY or EEXIST), as the contract suite checks for both paths.

Each message's element list is one netlink attribute, whose length is 16 bits: a long list is split over several
messages of the same batch (``MAX_ELEMENTS_BYTES``). The batch is one transaction all the same.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Iterator

from magw.desired.nft.values import NftTable
from magw.drivers.netlink.nlattr import attr, attr_nested
from magw.reconcile.nftdelta import MapDelta, NftElementDelta, SetDelta

NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_NEWSETELEM = 12
NFT_MSG_DELSETELEM = 14
# enum nft_set_elem_list_attributes
NFTA_SET_ELEM_LIST_TABLE = 1
NFTA_SET_ELEM_LIST_SET = 2
NFTA_SET_ELEM_LIST_ELEMENTS = 3
NFTA_LIST_ELEM = 1
# enum nft_set_elem_attributes
NFTA_SET_ELEM_KEY = 1
NFTA_SET_ELEM_DATA = 2
NFTA_SET_ELEM_FLAGS = 3
NFTA_SET_ELEM_USERDATA = 6
NFTA_DATA_VALUE = 1
NFT_SET_ELEM_INTERVAL_END = 1
# libnftnl's user data TLV (type u8, length u8): NFTNL_UDATA_SET_ELEM_FLAGS = 1, NFTNL_SET_ELEM_F_INTERVAL_OPEN = 1
_OPEN_UDATA = attr(NFTA_SET_ELEM_USERDATA, bytes((1, 4)) + struct.pack("=I", 1))

FAMILIES = {"inet": 1, "ip": 2, "ip6": 10}  # NFPROTO_*
_V4 = "ipv4_addr"
# Under the 16-bit attribute length with room for one more element (an interval map's is 56 bytes).
MAX_ELEMENTS_BYTES = 60_000
NFGENMSG = struct.Struct("!BBH")  # family, version, res_id (big-endian)
BE32 = struct.Struct("!I")
V4_END = 1 << 32
_END_FLAGS = attr(NFTA_SET_ELEM_FLAGS, BE32.pack(NFT_SET_ELEM_INTERVAL_END))


def expressible(table: NftTable, delta: NftElementDelta) -> bool:
    """Whether every set and map of ``delta`` is one this module writes (see the module docstring)."""
    if table.family not in FAMILIES:
        return False
    flags = {s.name: s.flags for s in table.sets} | {m.name: m.flags for m in table.maps}
    if any(not set(flags.get(name, ("?",))) <= {"interval"} for name in _names(delta)):
        return False
    return all(s.type == _V4 for s in delta.sets) and all(m.type == _V4 and m.map == _V4 for m in delta.maps)


def _names(delta: NftElementDelta) -> Iterator[str]:
    yield from (s.name for s in delta.sets)
    yield from (m.name for m in delta.maps)


def _key(packed: bytes) -> bytes:
    return attr_nested(NFTA_SET_ELEM_KEY, attr(NFTA_DATA_VALUE, packed))


def _data(packed: bytes) -> bytes:
    return attr_nested(NFTA_SET_ELEM_DATA, attr(NFTA_DATA_VALUE, packed))


def _elem(*parts: bytes) -> bytes:
    return attr_nested(NFTA_LIST_ELEM, *parts)


def bounds(element: str) -> tuple[int, int]:
    """``[start, end)`` of a canonical interval element: an address, a prefix or ``a-b``; ``end`` may be 2**32."""
    if "/" in element:
        net = ipaddress.IPv4Network(element)
        start = int(net.network_address)
        return start, start + net.num_addresses
    low, _, high = element.partition("-")
    start = int(ipaddress.IPv4Address(low))
    return start, int(ipaddress.IPv4Address(high or low)) + 1


def _interval(element: str, data: bytes | None, *, add: bool) -> list[bytes]:
    """The one or two kernel elements of an interval; the value (a map's) on the start, user data only on adds."""
    start, end = bounds(element)
    first = [_key(BE32.pack(start)), attr(NFTA_SET_ELEM_FLAGS, BE32.pack(0))]
    if data is not None:
        first.append(_data(data))
    if end == V4_END:
        return [_elem(*first, *((_OPEN_UDATA,) if add else ()))]
    return [_elem(*first), _elem(_key(BE32.pack(end)), _END_FLAGS)]


def _address(text: str) -> bytes:
    return socket.inet_aton(text)  # canonical dotted quads only (preflight): inet_aton's laxer forms never reach it


def set_elements(d: SetDelta, items: tuple[str, ...], *, add: bool) -> list[bytes]:
    """Each element of ``items`` of set ``d`` as ``NFTA_LIST_ELEM`` attributes."""
    if d.interval:
        return [e for item in items for e in _interval(item, None, add=add)]
    return [_elem(_key(_address(item))) for item in items]


def map_elements(d: MapDelta, *, add: bool) -> list[bytes]:
    """The pairs to add (key and value), or the keys of the pairs to delete, of map ``d``."""
    pairs = d.add if add else d.delete
    if d.interval:
        return [e for k, v in pairs for e in _interval(k, _address(v) if add else None, add=add)]
    if add:
        return [_elem(_key(_address(k)), _data(_address(v))) for k, v in pairs]
    return [_elem(_key(_address(k))) for k, _ in pairs]


def list_head(family: str, table: str, name: str) -> bytes:
    """``struct nfgenmsg`` and the table and set attributes: how every request about set ``name`` begins (after
    ``struct nlmsghdr``); a dump request is this alone (``nfdump``)."""
    return (
        NFGENMSG.pack(FAMILIES[family], 0, 0)
        + attr(NFTA_SET_ELEM_LIST_TABLE, table.encode() + b"\0")
        + attr(NFTA_SET_ELEM_LIST_SET, name.encode() + b"\0")
    )


def _chunks(elems: list[bytes]) -> Iterator[list[bytes]]:
    chunk: list[bytes] = []
    size = 0
    for e in elems:
        if chunk and size + len(e) > MAX_ELEMENTS_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(e)
        size += len(e)
    if chunk:
        yield chunk


def _bodies(family: str, table: str, name: str, elems: list[bytes]) -> Iterator[bytes]:
    head = list_head(family, table, name)
    for chunk in _chunks(elems):
        yield head + attr_nested(NFTA_SET_ELEM_LIST_ELEMENTS, *chunk)


def requests(family: str, table: str, delta: NftElementDelta) -> list[tuple[int, bytes]]:
    """``(message type, body)`` of every request of the batch: every delete, then every add, in ``delta``'s order.

    ``delta`` must be ``expressible`` and its elements canonical (``elemcmds.delta_errors`` found nothing).
    """
    new = NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWSETELEM
    delete = NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_DELSETELEM
    parts = [(delete, d.name, set_elements(d, d.delete, add=False)) for d in delta.sets if d.delete]
    parts += [(delete, m.name, map_elements(m, add=False)) for m in delta.maps if m.delete]
    parts += [(new, d.name, set_elements(d, d.add, add=True)) for d in delta.sets if d.add]
    parts += [(new, m.name, map_elements(m, add=True)) for m in delta.maps if m.add]
    return [(kind, body) for kind, name, elems in parts for body in _bodies(family, table, name, elems)]
