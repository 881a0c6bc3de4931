"""Our reading of an nftables set dump (``magw.drivers.nft.nfdump``): the kernel's elements to nft's strings.

Replies are assembled by hand from ``linux/netfilter/nf_tables.h``; the kernel test
tests/kernel/test_nft_rawobserve.py compares the whole read with libnftables' listing.
"""

from __future__ import annotations

import struct

import pytest

from magw.drivers.netlink.nlattr import MalformedMessage
from magw.drivers.nft import nfdump

NESTED = 0x8000


def _nla(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) & 3)


def _elem(key: bytes, *, end: bool | None = None, value: bytes | None = None) -> bytes:
    parts = _nla(1 | NESTED, _nla(1, key))
    if end is not None:
        parts += _nla(3, struct.pack("!I", int(end)))
    if value is not None:
        parts += _nla(2 | NESTED, _nla(1, value))
    return _nla(1 | NESTED, parts)


def _reply(*elems: bytes) -> bytes:
    body = bytes([2, 0, 0, 0]) + _nla(1, b"magw\0") + _nla(2, b"s\0") + _nla(3 | NESTED, b"".join(elems))
    return struct.pack("=IHHII", 16 + len(body), 10 << 8 | 12, 2, 1, 0) + body


def test_a_plain_set_reply_is_its_addresses() -> None:
    replies = [_reply(_elem(bytes([10, 0, 0, 2]))), _reply(_elem(bytes([10, 0, 0, 1])))]
    found = nfdump.kernel_elements(replies)
    assert nfdump.set_strings(found, interval=False) == ("10.0.0.2", "10.0.0.1")


def test_a_map_reply_is_its_pairs() -> None:
    found = nfdump.kernel_elements([_reply(_elem(bytes([10, 0, 0, 1]), value=bytes([169, 254, 0, 1])))])
    assert nfdump.map_pairs(found, interval=False) == (("10.0.0.1", "169.254.0.1"),)


def test_an_interval_set_as_the_kernel_dumps_it() -> None:
    """In the kernel's (descending) order, with nft's lone end element at 0.0.0.0 and an open last interval."""
    elems = [
        _elem(bytes([250, 0, 0, 0]), end=False),  # open: to 255.255.255.255
        _elem(bytes([10, 2, 0, 0]), end=True),
        _elem(bytes([10, 1, 0, 0]), end=False),
        _elem(bytes([10, 1, 0, 0]), end=True),  # adjacent: [10.0/16) then [10.1/16)
        _elem(bytes([10, 0, 0, 0]), end=False),
        _elem(bytes([9, 0, 0, 8]), end=True),
        _elem(bytes([9, 0, 0, 7]), end=False),
        _elem(bytes([0, 0, 0, 0]), end=True),  # nft's, belongs to no interval
    ]
    found = nfdump.kernel_elements([_reply(*elems)])
    assert nfdump.set_strings(found, interval=True) == (
        "9.0.0.7",
        "10.0.0.0/16",
        "10.1.0.0/16",
        "250.0.0.0-255.255.255.255",
    )


@pytest.mark.parametrize(
    ("start", "end", "text"),
    [
        (0, 1 << 32, "0.0.0.0/0"),
        (0xF0000000, 1 << 32, "240.0.0.0/4"),
        (0x0A000001, 0x0A00000A, "10.0.0.1-10.0.0.9"),
        (0x0A000000, 0x0A000100, "10.0.0.0/24"),
        (0x0A000080, 0x0A000180, "10.0.0.128-10.0.1.127"),  # a prefix's size, not aligned
        (0xFFFFFFFF, 1 << 32, "255.255.255.255"),
    ],
)
def test_interval_text_is_what_nft_prints(start: int, end: int, text: str) -> None:
    assert nfdump.interval_text(start, end) == text


def test_an_interval_map_carries_the_value_of_its_start() -> None:
    elems = [_elem(bytes([10, 3, 0, 0]), end=True), _elem(bytes([10, 2, 0, 0]), end=False, value=bytes([1, 2, 3, 4]))]
    found = nfdump.kernel_elements([_reply(*elems)])
    assert nfdump.map_pairs(found, interval=True) == (("10.2.0.0/16", "1.2.3.4"),)


def test_an_element_without_a_key_or_with_a_short_one_is_malformed() -> None:
    no_key = _nla(1 | NESTED, _nla(3, struct.pack("!I", 0)))
    with pytest.raises(MalformedMessage, match="without a key"):
        nfdump.kernel_elements([_reply(no_key)])
    with pytest.raises(MalformedMessage, match="4-byte"):
        nfdump.kernel_elements([_reply(_elem(bytes([10, 0, 0])))])
    with pytest.raises(MalformedMessage, match="without a value"):
        nfdump.map_pairs(nfdump.kernel_elements([_reply(_elem(bytes([10, 0, 0, 1])))]), interval=False)
