"""Pure tests (no kernel) of the hand-packed neighbor/FDB codec: ``neighfast.pack_fdb`` and ``neighdump``'s
reader, in particular an FDB entry's own destination port (NDA_PORT, a big-endian u16)."""

from __future__ import annotations

import socket
import struct
from ipaddress import IPv4Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magw.desired.state import Fdb
from magw.drivers.netlink import neighdump, neighfast, nlattr
from magw.drivers.netlink.neighdump import AF_BRIDGE, NDA_DST, NDA_LLADDR, NDA_PORT, NDMSG, NUD_PERMANENT
from magw.reconcile.changeset import Op
from tests.fuzz import targets

INDEX = 8
ENTRY = Fdb(dev="vxlan-tunnel", mac="02:53:f1:12:00:04", dst=IPv4Address("198.51.100.4"))
NDA_VNI = 7
NDA_IFINDEX = 8
NDA_CACHEINFO = 3


def _attrs(msg: bytes) -> list[tuple[int, bytes]]:
    length = struct.unpack_from("=I", msg)[0]
    return list(nlattr.iter_attrs(msg, neighdump._HDR, length))


def _reply(*attrs: bytes, family: int = AF_BRIDGE, state: int = NUD_PERMANENT, index: int = INDEX) -> bytes:
    """An RTM_NEWNEIGH dump reply, attributes as given (the kernel's order: lladdr, dst, port, vni, ...)."""
    body = NDMSG.pack(family, 0, 0, index, state, neighfast.NTF_SELF, 0) + b"".join(attrs)
    return nlattr.message(neighdump.RTM_NEWNEIGH, nlattr.NLM_F_MULTI, body)


def _kernel_like(port: bytes | None) -> bytes:
    """Like vxlan_fdb_info: lladdr, dst, [port], vni, ifindex, cacheinfo."""
    return _reply(
        nlattr.attr(NDA_LLADDR, bytes.fromhex("0253f1120004")),
        nlattr.attr(NDA_DST, IPv4Address("198.51.100.4").packed),
        *([] if port is None else [nlattr.attr(NDA_PORT, port)]),
        nlattr.attr_u32(NDA_VNI, 1000),
        nlattr.attr_u32(NDA_IFINDEX, 0),
        nlattr.attr(NDA_CACHEINFO, bytes(16)),
    )


def _parse(*replies: bytes) -> list[neighdump.Entry]:
    return list(neighdump.parse_entries(list(replies), AF_BRIDGE, INDEX))


# ---- pack_fdb


def test_an_entry_without_a_port_sends_no_nda_port() -> None:
    msg = neighfast.pack_fdb(ENTRY, INDEX, delete=False)
    assert [kind for kind, _ in _attrs(msg)] == [NDA_LLADDR, NDA_DST]


def test_an_entry_with_a_port_sends_it_big_endian() -> None:
    msg = neighfast.pack_fdb(Fdb(dev=ENTRY.dev, mac=ENTRY.mac, dst=ENTRY.dst, port=5001), INDEX, delete=False)
    assert _attrs(msg)[2] == (NDA_PORT, b"\x13\x89")
    assert msg.endswith(b"\x06\x00\x06\x00\x13\x89\x00\x00"), "nla_len 6, type 6, payload, 2 bytes of padding"


def test_a_delete_names_neither_destination_nor_port() -> None:
    """A VXLAN FDB delete without NDA_DST removes the whole entry, whatever its destination and port."""
    msg = neighfast.pack_fdb(Fdb(dev=ENTRY.dev, mac=ENTRY.mac, dst=ENTRY.dst, port=5001), INDEX, delete=True)
    assert [kind for kind, _ in _attrs(msg)] == [NDA_LLADDR]


@pytest.mark.parametrize("port", [-1, 65536, 1 << 20])
def test_a_port_outside_u16_is_a_one_line_value_error(port: int) -> None:
    with pytest.raises(ValueError, match=rf"^fdb 02:53:f1:12:00:04 dev vxlan-tunnel: port {port} is not 0-65535$"):
        neighfast.pack_fdb(Fdb(dev=ENTRY.dev, mac=ENTRY.mac, dst=ENTRY.dst, port=port), INDEX, delete=False)


def test_describe_names_the_port_only_when_set() -> None:
    with_port = Fdb(dev=ENTRY.dev, mac=ENTRY.mac, dst=ENTRY.dst, port=5001)
    assert neighfast.describe(Op(verb="create", kind="fdb", obj=ENTRY)) == (
        "fdb 02:53:f1:12:00:04 dst 198.51.100.4 dev vxlan-tunnel"
    )
    assert neighfast.describe(Op(verb="create", kind="fdb", obj=with_port)) == (
        "fdb 02:53:f1:12:00:04 dst 198.51.100.4 port 5001 dev vxlan-tunnel"
    )


# ---- parse_entries / dump_fdb


@given(port=st.none() | st.integers(min_value=1, max_value=0xFFFF))
def test_what_pack_fdb_writes_reads_back(port: int | None) -> None:
    """The request and a dump reply share their layout (an ndmsg header, lladdr, dst, port)."""
    entry = Fdb(dev=ENTRY.dev, mac=ENTRY.mac, dst=ENTRY.dst, port=port)
    assert _parse(neighfast.pack_fdb(entry, INDEX, delete=False)) == [(ENTRY.dst, ENTRY.mac, NUD_PERMANENT, port)]


def test_a_reply_like_the_kernels_reads_its_port_or_none() -> None:
    assert _parse(_kernel_like(b"\x13\x89")) == [(ENTRY.dst, ENTRY.mac, NUD_PERMANENT, 5001)]
    assert _parse(_kernel_like(None)) == [(ENTRY.dst, ENTRY.mac, NUD_PERMANENT, None)]


def test_nda_port_0_reads_as_none() -> None:
    """The kernel never sends 0 (it means the device's port): read like no port at all."""
    assert _parse(_kernel_like(b"\x00\x00")) == [(ENTRY.dst, ENTRY.mac, NUD_PERMANENT, None)]


@pytest.mark.parametrize("payload", [b"", b"\x13", b"\x13\x89\x00", b"\x00\x00\x13\x89"])
def test_an_nda_port_not_of_2_bytes_drops_the_entry(payload: bytes) -> None:
    """Like an NDA_DST that is not 4 bytes: no entry (never an error); the next reply still reads."""
    assert _parse(_kernel_like(payload), _kernel_like(None)) == [(ENTRY.dst, ENTRY.mac, NUD_PERMANENT, None)]
    targets.netlink_dump(_kernel_like(payload))  # the fuzz target's rule holds


def test_an_nda_port_cut_off_by_the_message_end_is_absent() -> None:
    """A truncated trailing attribute ends the walk (nlattr.iter_attrs), as for every attribute of the file."""
    whole = _reply(
        nlattr.attr(NDA_LLADDR, bytes.fromhex("0253f1120004")),
        nlattr.attr(NDA_DST, IPv4Address("198.51.100.4").packed),
        nlattr.attr(NDA_PORT, b"\x13\x89"),
    )
    cut = whole[:-3]  # the port's header and one byte of its payload
    cut = struct.pack("=I", len(cut)) + cut[4:]
    assert _parse(cut) == [(ENTRY.dst, ENTRY.mac, NUD_PERMANENT, None)]
    targets.netlink_dump(cut)


def test_neighbor_replies_read_without_a_port() -> None:
    reply = _reply(
        nlattr.attr(NDA_DST, IPv4Address("240.0.0.2").packed),
        nlattr.attr(NDA_LLADDR, bytes.fromhex("0253f0000002")),
        family=socket.AF_INET,
    )
    got = list(neighdump.parse_entries([reply], socket.AF_INET, INDEX))
    assert got == [(IPv4Address("240.0.0.2"), "02:53:f0:00:00:02", NUD_PERMANENT, None)]


class _Sock:
    """A RawNetlink stand-in: ``dump`` hands back canned replies and records the request."""

    def __init__(self, replies: list[bytes]) -> None:
        self.replies = replies
        self.requests: list[bytes] = []

    def dump(self, request: bytes) -> list[bytes]:
        self.requests.append(request)
        return self.replies


def test_dump_fdb_gives_mac_dst_and_port_of_permanent_entries() -> None:
    other = _reply(
        nlattr.attr(NDA_LLADDR, bytes.fromhex("0253f1120005")),
        nlattr.attr(NDA_DST, IPv4Address("198.51.100.5").packed),
        nlattr.attr(NDA_PORT, b"\x13\x8a"),
        state=0x02,  # NUD_REACHABLE: not ours
    )
    sock = _Sock([_kernel_like(b"\x13\x89"), _kernel_like(None), other])
    got = neighdump.dump_fdb(sock, INDEX)  # type: ignore[arg-type]
    assert got == [(ENTRY.mac, ENTRY.dst, 5001), (ENTRY.mac, ENTRY.dst, None)]
    assert sock.requests == [neighdump.pack_neigh_dump(AF_BRIDGE, INDEX)]


def test_dump_neighbors_is_unchanged() -> None:
    reply = _reply(
        nlattr.attr(NDA_DST, IPv4Address("240.0.0.2").packed),
        nlattr.attr(NDA_LLADDR, bytes.fromhex("0253f0000002")),
        family=socket.AF_INET,
    )
    assert neighdump.dump_neighbors(_Sock([reply]), INDEX) == [  # type: ignore[arg-type]
        (IPv4Address("240.0.0.2"), "02:53:f0:00:00:02")
    ]


def test_the_kernels_own_replies_read_back() -> None:
    """The seeds captured from kernel 6.18 (tests/fuzz/capture_netlink.py: vx0 is ifindex 4): an entry with
    ``port 5001`` carries NDA_PORT, one without carries none."""
    seeds = {path.name: path.read_bytes() for path in (targets.CORPORA / "netlink_dump").glob("fdb-*.bin")}
    got = sorted(e for seed in seeds.values() for e in neighdump.parse_entries([seed], AF_BRIDGE, 4))
    noarp = 0x40  # the kernel's permanent FDB entries are NUD_PERMANENT | NUD_NOARP
    assert got == [
        (IPv4Address("192.0.2.60"), "02:00:00:00:01:06", NUD_PERMANENT | noarp, None),
        (IPv4Address("192.0.2.61"), "02:00:00:00:01:07", NUD_PERMANENT | noarp, 5001),
    ]

