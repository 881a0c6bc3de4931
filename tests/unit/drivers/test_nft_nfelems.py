"""Element changes as our own nfnetlink messages (``magw.drivers.nft.nfelems``): which changes, which bytes.

The kernel contract (tests/kernel/test_nft_elements_contract.py) checks what the kernel makes of them; here the
layout is checked against messages assembled by hand from ``linux/netfilter/nf_tables.h``.
"""

from __future__ import annotations

import struct

import pytest

from magw.desired.nft.values import NftMap, NftSet, NftTable
from magw.drivers.nft import nfelems
from magw.reconcile.nftdelta import MapDelta, NftElementDelta, SetDelta

NEW = 10 << 8 | 12  # NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWSETELEM
DEL = 10 << 8 | 14  # ... | NFT_MSG_DELSETELEM


def _table(*, family: str = "ip", set_flags: tuple[str, ...] = (), set_type: str = "ipv4_addr") -> NftTable:
    return NftTable(
        family=family,
        name="magw",
        sets=(NftSet(name="s", type=set_type, flags=set_flags),),
        maps=(NftMap(name="m", type="ipv4_addr", map="ipv4_addr"),),
    )


def _map(**kw: object) -> MapDelta:
    return MapDelta(name="m", type="ipv4_addr", map="ipv4_addr", **kw)  # type: ignore[arg-type]


def _set(**kw: object) -> NftElementDelta:
    return NftElementDelta(sets=(SetDelta(name="s", type="ipv4_addr", **kw),))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("element", "start", "end"),
    [
        ("10.0.0.1", 0x0A000001, 0x0A000002),
        ("10.1.0.0/16", 0x0A010000, 0x0A020000),
        ("10.0.0.1-10.0.0.9", 0x0A000001, 0x0A00000A),
        ("0.0.0.0/0", 0, 1 << 32),
        ("255.255.255.255", 0xFFFFFFFF, 1 << 32),
    ],
)
def test_bounds_are_half_open(element: str, start: int, end: int) -> None:
    assert nfelems.bounds(element) == (start, end)


def test_what_is_written_here_and_what_goes_to_libnftables() -> None:
    assert nfelems.expressible(_table(), _set(add=("10.0.0.1",)))
    assert nfelems.expressible(_table(family="inet", set_flags=("interval",)), _set(add=("10.0.0.0/8",)))
    assert not nfelems.expressible(_table(family="bridge"), _set(add=("10.0.0.1",)))
    assert not nfelems.expressible(_table(set_flags=("timeout",)), _set(add=("10.0.0.1",)))
    assert not nfelems.expressible(_table(set_flags=("constant",)), _set(add=("10.0.0.1",)))
    ports = NftElementDelta(sets=(SetDelta(name="s", type="inet_service", add=("80",)),))
    assert not nfelems.expressible(_table(set_type="inet_service"), ports)
    verdicts = NftElementDelta(maps=(MapDelta(name="m", type="ipv4_addr", map="verdict", add=(("10.0.0.1", "drop"),)),))
    assert not nfelems.expressible(_table(), verdicts)
    unknown = NftElementDelta(sets=(SetDelta(name="nope", type="ipv4_addr", add=("10.0.0.1",)),))
    assert not nfelems.expressible(_table(), unknown)


def _nla(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) & 3)


NESTED = 0x8000


def test_one_address_added_to_a_plain_set_by_hand() -> None:
    """nfgenmsg (AF ip = 2, version 0, res_id 0), table, set, then one list element holding the key's value."""
    key = _nla(1 | NESTED, _nla(1, bytes([10, 0, 0, 1])))  # NFTA_SET_ELEM_KEY { NFTA_DATA_VALUE }
    elem = _nla(1 | NESTED, key)  # NFTA_LIST_ELEM
    body = bytes([2, 0, 0, 0]) + _nla(1, b"magw\0") + _nla(2, b"s\0") + _nla(3 | NESTED, elem)
    assert nfelems.requests("ip", "magw", _set(add=("10.0.0.1",))) == [(NEW, body)]


def test_one_prefix_deleted_from_an_interval_map_by_hand() -> None:
    """A delete names the start (flags 0) and the end (flags NFT_SET_ELEM_INTERVAL_END, big-endian): no value."""
    start = _nla(1 | NESTED, _nla(1 | NESTED, _nla(1, bytes([10, 1, 0, 0]))) + _nla(3, struct.pack("!I", 0)))
    end = _nla(1 | NESTED, _nla(1 | NESTED, _nla(1, bytes([10, 2, 0, 0]))) + _nla(3, struct.pack("!I", 1)))
    body = bytes([1, 0, 0, 0]) + _nla(1, b"t\0") + _nla(2, b"m\0") + _nla(3 | NESTED, start + end)
    delta = NftElementDelta(
        maps=(_map(interval=True, delete=(("10.1.0.0/16", "1.1.1.1"),)),),
    )
    assert nfelems.requests("inet", "t", delta) == [(DEL, body)]


def test_a_map_add_carries_the_value_as_data() -> None:
    delta = NftElementDelta(maps=(_map(add=(("10.0.0.1", "169.254.0.9"),)),))
    key = _nla(1 | NESTED, _nla(1, bytes([10, 0, 0, 1])))
    data = _nla(2 | NESTED, _nla(1, bytes([169, 254, 0, 9])))  # NFTA_SET_ELEM_DATA { NFTA_DATA_VALUE }
    body = bytes([2, 0, 0, 0]) + _nla(1, b"magw\0") + _nla(2, b"m\0") + _nla(3 | NESTED, _nla(1 | NESTED, key + data))
    assert nfelems.requests("ip", "magw", delta) == [(NEW, body)]


def test_every_delete_comes_before_every_add() -> None:
    delta = NftElementDelta(
        sets=(SetDelta(name="s", type="ipv4_addr", add=("10.0.0.2",), delete=("10.0.0.1",)),),
        maps=(_map(add=(("1.1.1.1", "2.2.2.2"),), delete=(("1.1.1.1", "3.3.3.3"),)),),
    )
    assert [kind for kind, _ in nfelems.requests("ip", "magw", delta)] == [DEL, DEL, NEW, NEW]


def _elements_attr_lengths(body: bytes) -> list[int]:
    pos, lengths = 4, []
    while pos < len(body):
        length, kind = struct.unpack_from("=HH", body, pos)
        if kind & 0x7FFF == 3:
            lengths.append(length)
        pos += (length + 3) & ~3
    return lengths


def test_a_long_list_is_split_over_messages_under_the_attribute_limit() -> None:
    """20,000 prefixes (40,000 kernel elements) do not fit one 16-bit attribute: several messages, each under it,
    holding every element once."""
    prefixes = tuple(f"11.{i >> 8}.{i & 255}.0/24" for i in range(20_000))
    requests = nfelems.requests("ip", "magw", _set(interval=True, add=prefixes))
    lengths = [n for _, body in requests for n in _elements_attr_lengths(body)]
    assert len(requests) > 1 and len(lengths) == len(requests)
    assert all(n < 1 << 16 for n in lengths)
    # Each kernel element: list element header 4 + key (4 + value 4 + 4) + flags 8 = 24 bytes; two per prefix.
    assert sum(n - 4 for n in lengths) == 2 * len(prefixes) * 24
