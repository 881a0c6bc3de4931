"""Neighbor and VXLAN FDB dumps on the raw socket: RTM_GETNEIGH, decoded by hand.

Shaped for speed (docs/performance.md): read through pyroute2, each neighbor or FDB entry cost about 0.26 ms (its
asyncio-driven dump and attribute decoding), so observing a gateway of a 5,000-node cluster (5,000
neighbors and 5,000 FDB entries on ``vx-submariner``) took about 3 s. Here a dump is one request on the
driver's ``RawNetlink`` socket and each reply is an ``ndmsg`` header plus a few attributes, read with one
struct unpack and a walk over them.

Requests (``NETLINK_GET_STRICT_CHK`` is on for the socket, so the header filters, kernel >= 4.20):

- neighbors: ``AF_INET`` with ``NDA_IFINDEX`` = the device: only that device's entries come back;
- FDB: ``AF_BRIDGE`` with ``ndm_ifindex`` = the device (the kernel's ``brport_idx`` filter of
  ``rtnl_fdb_dump``): only that VXLAN device's entries.

What counts as ours is unchanged (``magw.drivers.netlink.addrs``): permanent entries with a MAC on our
links; for the FDB, one with an IPv4 destination. An FDB entry's ``NDA_PORT`` (a big-endian u16) is its
own destination port; the kernel sends it only when it is neither 0 nor the device's port, so an entry
without it reads as port None.

Malformed replies (the kernel never sends one) are dropped, never an error: a reply shorter than its
headers, or with an ``NDA_DST`` that is not 4 bytes, an empty ``NDA_LLADDR`` or an ``NDA_PORT`` that is
not 2 bytes, is no entry (so the next sync writes it again); an attribute cut off by the end of the
message ends the walk, and what it would have said is absent (``nlattr.iter_attrs``).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from ipaddress import IPv4Address

from magw.drivers.netlink.nlattr import attr_u32, iter_attrs, message
from magw.drivers.netlink.rawsock import RawNetlink

RTM_NEWNEIGH = 28
RTM_GETNEIGH = 30
NLM_F_REQUEST = 0x01
NLM_F_DUMP = 0x300
NDA_DST = 1
NDA_LLADDR = 2
NDA_IFINDEX = 8
NDA_PORT = 6
NUD_PERMANENT = 0x80
AF_BRIDGE = 7

NLMSGHDR = struct.Struct("=IHHII")
NDMSG = struct.Struct("=BBHiHBB")  # family, pad1, pad2, ifindex, state, flags, type
BE16 = struct.Struct("!H")  # NDA_PORT: network byte order, unlike the other attributes
_HDR = NLMSGHDR.size + NDMSG.size


def pack_neigh_dump(family: int, ifindex: int) -> bytes:
    """An RTM_GETNEIGH dump of ``family`` entries on device ``ifindex`` only.

    The strict checks differ by family (kernel net/core/neighbour.c and rtnetlink.c): an IPv4 neighbor
    dump wants ``ndm_ifindex`` 0 and the device in ``NDA_IFINDEX``; an FDB dump takes the device (the
    bridge port) in ``ndm_ifindex``.
    """
    if family == AF_BRIDGE:
        return message(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, NDMSG.pack(family, 0, 0, ifindex, 0, 0, 0))
    body = NDMSG.pack(family, 0, 0, 0, 0, 0, 0) + attr_u32(NDA_IFINDEX, ifindex)
    return message(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, body)


def _mac(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


Entry = tuple[IPv4Address, str, int, int | None]  # (dst, mac, state, port)


def parse_entries(replies: list[bytes], family: int, ifindex: int) -> Iterator[Entry]:
    """``(dst, mac, state, port)`` of each reply of ``family`` on ``ifindex`` that has an IPv4 dst and a MAC.

    ``port`` is ``NDA_PORT`` (VXLAN FDB entries only), None without one; 0, which the kernel never
    sends (it means the device's port), reads as None too.
    """
    for msg in replies:
        if len(msg) < _HDR:  # not even the headers: no entry (the raw socket only hands whole messages)
            continue
        length, kind, _flags, _seq, _pid = NLMSGHDR.unpack_from(msg, 0)
        if kind != RTM_NEWNEIGH or length < _HDR:
            continue
        fam, _p1, _p2, index, state, _nflags, _ntype = NDMSG.unpack_from(msg, NLMSGHDR.size)
        if fam != family or index != ifindex:  # the filter is advisory on an old kernel: check anyway
            continue
        dst = mac = port = None
        for kind_, payload in iter_attrs(msg, _HDR, length):
            if kind_ == NDA_DST:
                dst = payload
            elif kind_ == NDA_LLADDR:
                mac = payload
            elif kind_ == NDA_PORT:
                port = payload
        if dst is None or len(dst) != 4 or not mac:
            continue
        if port is None:
            yield IPv4Address(dst), _mac(mac), state, None
        elif len(port) == BE16.size:
            yield IPv4Address(dst), _mac(mac), state, BE16.unpack(port)[0] or None


def dump_neighbors(sock: RawNetlink, ifindex: int) -> list[tuple[IPv4Address, str]]:
    """Permanent IPv4 neighbors with a MAC on ``ifindex``: ``(ip, mac)``."""
    replies = sock.dump(pack_neigh_dump(socket.AF_INET, ifindex))
    entries = parse_entries(replies, socket.AF_INET, ifindex)
    return [(ip, mac) for ip, mac, state, _port in entries if state & NUD_PERMANENT]


def dump_fdb(sock: RawNetlink, ifindex: int) -> list[tuple[str, IPv4Address, int | None]]:
    """Permanent FDB entries with an IPv4 destination on ``ifindex``: ``(mac, dst, port)``, one per destination
    (``port`` None: the device's own)."""
    replies = sock.dump(pack_neigh_dump(AF_BRIDGE, ifindex))
    entries = parse_entries(replies, AF_BRIDGE, ifindex)
    return [(mac, dst, port) for dst, mac, state, port in entries if state & NUD_PERMANENT]
