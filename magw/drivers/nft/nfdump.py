"""The elements of an IPv4 set or map read with our own nfnetlink dump, in the strings ``nft -j list`` gives.

Why (docs/nft-driver.md, "Observing without libnftables' element listing"): the JSON listing of a table with
100k elements is 5-10 MB that ``json.loads`` parses in ONE call holding the GIL for 0.4-0.8 s, so an audit's
observe in one thread stalled the events of another (docs/performance.md row 22e), and libnftables takes
80-135 MB to produce it. The kernel hands the same elements out in ~60 kB messages we decode one by one.

The request is ``NFT_MSG_GETSETELEM`` with ``NLM_F_DUMP`` for one named set; the replies are ``NFT_MSG_NEWSETELEM``
messages, each with a list of elements: a key (``NFTA_DATA_VALUE``, 4 bytes), for a map a value, for an interval
set flags. ``elements``/``pairs`` turn the kernel's elements into our strings, as nft 1.0.6 prints them:

- a plain set or map: each key (and value) as a dotted quad;
- an interval set or map: the kernel holds ``[a, b)`` as a start element ``a`` (flags 0; a map's value on it) and
  an end element ``b`` (``NFT_SET_ELEM_INTERVAL_END``); one that reaches 255.255.255.255 has no end element. nft
  also puts a lone end element at 0.0.0.0 into a set it creates with elements: it belongs to no interval and is
  skipped. An interval is printed as an address when it holds one, as a prefix when it is exactly one, else as
  ``a-b`` (the last address included), which is what ``elements.canonical`` says nft prints.

Pure: bytes in, strings out; a message we cannot read raises ``MalformedMessage`` (one line).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable

from magw.drivers.netlink.nlattr import NLMSGHDR, MalformedMessage, attrs_of
from magw.drivers.nft.nfelems import (
    BE32,
    NFGENMSG,
    NFNL_SUBSYS_NFTABLES,
    NFT_SET_ELEM_INTERVAL_END,
    NFTA_DATA_VALUE,
    NFTA_SET_ELEM_DATA,
    NFTA_SET_ELEM_FLAGS,
    NFTA_SET_ELEM_KEY,
    NFTA_SET_ELEM_LIST_ELEMENTS,
    V4_END,
)
from magw.util.courtesy import courteous, step_aside
from magw.util.gentlesort import sorted_in_steps

NFT_MSG_GETSETELEM = 13
GETSETELEM = NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETSETELEM
# A kernel element: (key, is the end of an interval, value or None)
Element = tuple[int, bool, int | None]


_HDR = struct.Struct("=HH")
_TYPE_MASK = 0x3FFF
# A key or value: a nested attribute holding one NFTA_DATA_VALUE of 4 bytes, 12 bytes in all.
_NESTED_VALUE = struct.Struct("=HHHH4s")


def _value(buf: bytes, pos: int, what: str, msg: bytes) -> int:
    """The 4-byte value inside the nested attribute at ``buf[pos:]`` (a key's or a map value's)."""
    if pos + _NESTED_VALUE.size > len(buf):
        raise MalformedMessage("NFT_MSG_NEWSETELEM", msg, f"{what} is not a 4-byte value")
    outer, _, inner, kind, raw = _NESTED_VALUE.unpack_from(buf, pos)
    if outer != _NESTED_VALUE.size or inner != 8 or kind & _TYPE_MASK != NFTA_DATA_VALUE:
        raise MalformedMessage("NFT_MSG_NEWSETELEM", msg, f"{what} is not a 4-byte value")
    value: int = BE32.unpack(raw)[0]
    return value


def kernel_elements(replies: Iterable[bytes]) -> list[Element]:
    """Every element of the dump's reply messages (headers included), in the kernel's order.

    Shaped for speed (docs/nft-driver.md): one loop over each message's element list with ``unpack_from`` at
    offsets, no dict or slice per element (the general ``attrs_of`` was two thirds of a 100k-element read). An
    audit's reader steps aside every 256 elements while the sync path works (``magw.util.courtesy``).
    """
    out: list[Element] = []
    start = NLMSGHDR.size + NFGENMSG.size
    unpack = _HDR.unpack_from
    for msg in replies:
        found = attrs_of(msg, start).get(NFTA_SET_ELEM_LIST_ELEMENTS)
        if found is None:
            continue  # a set without elements answers with none
        pos, stop = 0, len(found)
        while pos + 4 <= stop:
            length, _ = unpack(found, pos)
            if length < 4 or pos + length > stop:
                raise MalformedMessage("NFT_MSG_NEWSETELEM", msg, "an element runs past its list")
            key: int | None = None
            value: int | None = None
            flags = 0
            at, end = pos + 4, pos + length
            while at + 4 <= end:
                size, kind = unpack(found, at)
                if size < 4 or at + size > end:
                    raise MalformedMessage("NFT_MSG_NEWSETELEM", msg, "an attribute runs past its element")
                kind &= _TYPE_MASK
                if kind == NFTA_SET_ELEM_KEY:
                    key = _value(found, at, "the key", msg)
                elif kind == NFTA_SET_ELEM_DATA:
                    value = _value(found, at, "the value", msg)
                elif kind == NFTA_SET_ELEM_FLAGS and size == 8:
                    flags = BE32.unpack_from(found, at + 4)[0]
                at += (size + 3) & ~3
            if key is None:
                raise MalformedMessage("NFT_MSG_NEWSETELEM", msg, "an element without a key")
            out.append((key, bool(flags & NFT_SET_ELEM_INTERVAL_END), value))
            if not len(out) & 255:
                step_aside()
            pos += (length + 3) & ~3
    return out


def _dotted(value: int) -> str:
    return socket.inet_ntoa(BE32.pack(value))


def interval_text(start: int, end: int) -> str:
    """``[start, end)`` as nft prints it: an address, a prefix, or ``a-b``."""
    size = end - start
    if size == 1:
        return _dotted(start)
    if size & (size - 1) == 0 and start % size == 0:
        return f"{_dotted(start)}/{32 - size.bit_length() + 1}"
    return f"{_dotted(start)}-{_dotted(end - 1)}"


def intervals(found: list[Element]) -> list[tuple[int, int, int | None]]:
    """The ``(start, end, value)`` intervals of an interval set's kernel elements, in address order.

    An end element sorts before a start element of the same key (``[a, b)`` then ``[b, c)``); an end with no
    start open before it (nft's 0.0.0.0) is skipped; a start followed by another start, or by nothing, is open
    to the last address.
    """
    out: list[tuple[int, int, int | None]] = []
    open_start: tuple[int, int | None] | None = None
    # (key, is a start): an end sorts before a start of the same key; sorted in short steps (gentlesort).
    for key, _, is_end, value in courteous(sorted_in_steps((k, not end, end, v) for k, end, v in found)):
        if is_end:
            if open_start is not None:
                out.append((open_start[0], key, open_start[1]))
                open_start = None
            continue
        if open_start is not None:
            out.append((open_start[0], V4_END, open_start[1]))
        open_start = (key, value)
    if open_start is not None:
        out.append((open_start[0], V4_END, open_start[1]))
    return out


def set_strings(found: list[Element], *, interval: bool) -> tuple[str, ...]:
    """A set's elements as our strings."""
    if interval:
        return tuple(interval_text(start, end) for start, end, _ in courteous(intervals(found)))
    return tuple(_dotted(key) for key, _, _ in courteous(found))


def map_pairs(found: list[Element], *, interval: bool) -> tuple[tuple[str, str], ...]:
    """A map's ``(key, value)`` pairs as our strings; an element without a value is malformed."""
    if interval:
        items = [(interval_text(start, end), value) for start, end, value in courteous(intervals(found))]
    else:
        items = [(_dotted(key), value) for key, _, value in courteous(found)]
    if any(value is None for _, value in items):
        raise MalformedMessage("NFT_MSG_NEWSETELEM", b"", "a map element without a value")
    return tuple((key, _dotted(value)) for key, value in courteous(items) if value is not None)
