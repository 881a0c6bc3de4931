"""Nexthop objects and groups over rtnetlink (RTM_NEWNEXTHOP / RTM_DELNEXTHOP / RTM_GETNEXTHOP).

pyroute2 0.9.7 has no nexthop API. This module is the whole of it, written so that it
could be offered upstream: it depends only on the standard library, pyroute2 and the
framing helpers in ``nlattr`` (which upstream would swap for its own). It has two faces:

* ``nhmsg``: a message class in pyroute2's style (an ``nlmsg`` with an ``nla_map``), so
  pyroute2 can decode and encode nexthop messages like any other.
* plain helpers: ``NexthopSpec`` / ``GroupSpec`` values, ``encode_*`` functions that pack
  a request in about a microsecond, and ``decode_nexthop`` for dump replies.

Kernel reference: ``include/uapi/linux/nexthop.h`` and ``net/ipv4/nexthop.c``;
``Documentation/networking/nexthop-group-resilient.rst`` for resilient groups.

Wire format::

    struct nhmsg { u8 family; u8 scope; u8 protocol; u8 resvd; u32 flags; }   (scope: replies only)
    NHA_GROUP = array of struct nexthop_grp { u32 id; u8 weight; u8 weight_high; u16 resvd2; }
        (weight on the wire is weight-1; weight_high carries bits 8-15 since kernel 6.12)
    NHA_RES_GROUP = nested { NHA_RES_GROUP_BUCKETS u16, _IDLE_TIMER u32, _UNBALANCED_TIMER u32,
                             _UNBALANCED_TIME u64 (replies) }; timers in clock_t (USER_HZ = 100)

Kernel rules worth knowing (kernel 6.18): a group's ``family`` must be AF_UNSPEC; a
replace may not change a group's type ("Can not replace a nexthop group with one of a
different type.") nor a resilient group's bucket count ("Can not change number of
buckets of a resilient nexthop group."); delete and dump requests must leave
protocol/scope/flags zero.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any

from pyroute2.netlink import nla, nla_string, nlmsg

from magw.drivers.netlink.nlattr import (
    NLM_F_ACK,
    NLM_F_CREATE,
    NLM_F_DUMP,
    NLM_F_REPLACE,
    NLM_F_REQUEST,
    NLMSGHDR,
    U16,
    U32,
    U64,
    MalformedMessage,
    attr,
    attr_flag,
    attr_nested,
    attr_u16,
    attr_u32,
    attrs_of,
    iter_attrs,
    message,
)

RTM_NEWNEXTHOP = 104
RTM_DELNEXTHOP = 105
RTM_GETNEXTHOP = 106

# enum { NHA_* } in include/uapi/linux/nexthop.h
NHA_UNSPEC = 0
NHA_ID = 1  # u32; 0 in a request means "kernel assigns"
NHA_GROUP = 2  # array of struct nexthop_grp
NHA_GROUP_TYPE = 3  # u16, NEXTHOP_GRP_TYPE_*
NHA_BLACKHOLE = 4  # flag
NHA_OIF = 5  # u32 ifindex
NHA_GATEWAY = 6  # be32 / in6_addr
NHA_ENCAP_TYPE = 7  # u16, lwtunnel type
NHA_ENCAP = 8  # nested, lwtunnel encap
NHA_GROUPS = 9  # flag; dump filter: groups only
NHA_MASTER = 10  # u32; dump filter: nexthops on devices enslaved to this master
NHA_FDB = 11  # flag; FDB (vxlan) nexthop
NHA_RES_GROUP = 12  # nested, NHA_RES_GROUP_*
NHA_RES_BUCKET = 13  # nested, NHA_RES_BUCKET_*
NHA_OP_FLAGS = 14  # u32, NHA_OP_FLAG_* (request) / response flags (reply)
NHA_GROUP_STATS = 15  # nested
NHA_HW_STATS_ENABLE = 16  # u32
NHA_HW_STATS_USED = 17  # u32

NEXTHOP_GRP_TYPE_MPATH = 0  # hash-threshold
NEXTHOP_GRP_TYPE_RES = 1  # resilient (kernel >= 5.13)

NHA_RES_GROUP_PAD = 0
NHA_RES_GROUP_BUCKETS = 1  # u16
NHA_RES_GROUP_IDLE_TIMER = 2  # u32, clock_t
NHA_RES_GROUP_UNBALANCED_TIMER = 3  # u32, clock_t
NHA_RES_GROUP_UNBALANCED_TIME = 4  # u64, clock_t (reply only)

NHA_RES_BUCKET_PAD = 0
NHA_RES_BUCKET_INDEX = 1  # u16
NHA_RES_BUCKET_IDLE_TIME = 2  # u64, clock_t
NHA_RES_BUCKET_NH_ID = 3  # u32

NHA_OP_FLAG_DUMP_STATS = 1 << 0
NHA_OP_FLAG_DUMP_HW_STATS = 1 << 1
# Set by the kernel (6.12+) in a reply's NHA_OP_FLAGS when reserved group fields are zeroed,
# i.e. when nexthop_grp.weight_high is meaningful.
NHA_OP_FLAG_RESP_GRP_RESVD_0 = 1 << 31

RTNH_F_ONLINK = 4

# Timers travel as clock_t: USER_HZ ticks per second, fixed at 100 in the ABI.
USER_HZ = 100
TIMER_MAX_SECONDS = 0xFFFFFFFF // USER_HZ
WEIGHT_MAX = 0x10000

NHMSG = struct.Struct("=BBBBI")
NEXTHOP_GRP = struct.Struct("=IBBH")

CREATE_OR_REPLACE = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE


# --------------------------------------------------------------------------------------------
# pyroute2 message class


class nhmsg(nlmsg):  # type: ignore[misc]  # pyroute2 is untyped: its base classes are Any to mypy
    """Nexthop message (``struct nhmsg`` + ``NHA_*`` attributes) in pyroute2's style.

    ``NHA_GROUP`` decodes to a list of ``{"id": int, "weight": int}`` with the real weight
    (the wire carries weight - 1; ``weight_high`` is used only when the reply says it is
    valid, see ``NHA_OP_FLAG_RESP_GRP_RESVD_0``). ``NHA_GATEWAY`` decodes to text.
    """

    __slots__ = ()
    prefix = "NHA_"
    fields = (
        ("family", "B"),
        ("scope", "B"),
        ("protocol", "B"),
        ("resvd", "B"),
        ("flags", "I"),
    )
    nla_map = (
        ("NHA_UNSPEC", "none"),
        ("NHA_ID", "uint32"),
        ("NHA_GROUP", "nh_group"),
        ("NHA_GROUP_TYPE", "uint16"),
        ("NHA_BLACKHOLE", "flag"),
        ("NHA_OIF", "uint32"),
        ("NHA_GATEWAY", "nh_gateway"),
        ("NHA_ENCAP_TYPE", "uint16"),
        ("NHA_ENCAP", "hex"),
        ("NHA_GROUPS", "flag"),
        ("NHA_MASTER", "uint32"),
        ("NHA_FDB", "flag"),
        ("NHA_RES_GROUP", "res_group"),
        ("NHA_RES_BUCKET", "res_bucket"),
        ("NHA_OP_FLAGS", "uint32"),
        ("NHA_GROUP_STATS", "hex"),
        ("NHA_HW_STATS_ENABLE", "uint32"),
        ("NHA_HW_STATS_USED", "uint32"),
    )

    class nh_group(nla_string):  # type: ignore[misc]  # pyroute2 base is Any to mypy
        """``NHA_GROUP``: an array of ``struct nexthop_grp`` without per-entry headers."""

        __slots__ = ()

        def encode(self) -> None:
            self["value"] = pack_group_entries(tuple((m["id"], m.get("weight", 1)) for m in self.value))
            nla_string.encode(self)

        def decode(self) -> None:
            nla_string.decode(self)
            entries = unpack_group_entries(self["value"], weight_high=True)
            # `value` is a slot of pyroute2's base class, which mypy sees as Any.
            self.value = [{"id": i, "weight": w} for i, w in entries]  # type: ignore[misc]

    class nh_gateway(nla_string):  # type: ignore[misc]  # pyroute2 base is Any to mypy
        """``NHA_GATEWAY``: 4 (IPv4) or 16 (IPv6) bytes, as text."""

        __slots__ = ()

        def encode(self) -> None:
            self["value"] = ip_address(self.value).packed
            nla_string.encode(self)

        def decode(self) -> None:
            nla_string.decode(self)
            # `value` is a slot of pyroute2's base class, which mypy sees as Any.
            self.value = str(ip_address(bytes(self["value"])))  # type: ignore[misc]

    class res_group(nla):  # type: ignore[misc]  # pyroute2 base is Any to mypy
        """``NHA_RES_GROUP``: resilient group parameters (timers in clock_t)."""

        __slots__ = ()
        prefix = "NHA_RES_GROUP_"
        nla_flags = 0x8000  # NLA_F_NESTED
        nla_map = (
            ("NHA_RES_GROUP_PAD", "none"),
            ("NHA_RES_GROUP_BUCKETS", "uint16"),
            ("NHA_RES_GROUP_IDLE_TIMER", "uint32"),
            ("NHA_RES_GROUP_UNBALANCED_TIMER", "uint32"),
            ("NHA_RES_GROUP_UNBALANCED_TIME", "uint64"),
        )

    class res_bucket(nla):  # type: ignore[misc]  # pyroute2 base is Any to mypy
        """``NHA_RES_BUCKET``: one bucket of a resilient group (bucket dumps)."""

        __slots__ = ()
        prefix = "NHA_RES_BUCKET_"
        nla_flags = 0x8000  # NLA_F_NESTED
        nla_map = (
            ("NHA_RES_BUCKET_PAD", "none"),
            ("NHA_RES_BUCKET_INDEX", "uint16"),
            ("NHA_RES_BUCKET_IDLE_TIME", "uint64"),
            ("NHA_RES_BUCKET_NH_ID", "uint32"),
        )


# --------------------------------------------------------------------------------------------
# Plain values. Standard-library dataclasses (not attrs) so the module needs nothing upstream lacks.


@dataclass(frozen=True, kw_only=True, slots=True)
class NexthopSpec:
    """A single nexthop: ``ip nexthop add id ID [via GW] [dev OIF] | blackhole [fdb] [onlink]``.

    ``family`` is AF_INET or AF_INET6 (AF_UNSPEC is allowed for a blackhole); it must match
    ``gateway``. ``oif`` 0 means "no device" (only valid for blackhole and fdb nexthops).
    """

    id: int
    family: int = socket.AF_INET
    gateway: IPv4Address | IPv6Address | None = None
    oif: int = 0
    blackhole: bool = False
    fdb: bool = False
    onlink: bool = False
    protocol: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupSpec:
    """A nexthop group: ``ip nexthop add id ID group A[,W]/B[,W] [type resilient ...]``.

    ``members`` are ``(nexthop id, weight)`` with weights 1..65536 (above 256 needs kernel
    6.12). The resilient parameters are in seconds as iproute2 takes them; ``None`` leaves
    the kernel default (128 buckets, idle 120 s, unbalanced 0). They are ignored for
    ``mpath`` groups. ``unbalanced_time`` is only ever set by decoding (time spent unbalanced).
    """

    id: int
    members: tuple[tuple[int, int], ...]
    resilient: bool = False
    buckets: int | None = None
    idle_timer: int | None = None
    unbalanced_timer: int | None = None
    unbalanced_time: int | None = None
    fdb: bool = False
    protocol: int = 0


# --------------------------------------------------------------------------------------------
# Encoders


def _check_range(field: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{field}: must be {low}..{high}, got {value}")


def pack_group_entries(members: tuple[tuple[int, int], ...]) -> bytes:
    """The ``NHA_GROUP`` payload for ``(id, weight)`` pairs."""
    out = []
    for nh_id, weight in members:
        _check_range("group.members.id", nh_id, 1, 0xFFFFFFFF)
        _check_range("group.members.weight", weight, 1, WEIGHT_MAX)
        w = weight - 1
        out.append(NEXTHOP_GRP.pack(nh_id, w & 0xFF, w >> 8, 0))
    return b"".join(out)


def unpack_group_entries(payload: bytes, *, weight_high: bool) -> list[tuple[int, int]]:
    """``(id, weight)`` pairs from an ``NHA_GROUP`` payload.

    ``weight_high``: trust the ``weight_high`` byte. Before kernel 6.12 it was a reserved
    byte that old kernels did not promise to zero; only a reply carrying
    ``NHA_OP_FLAG_RESP_GRP_RESVD_0`` in ``NHA_OP_FLAGS`` guarantees it is meaningful, so
    decoders of replies pass that flag's presence here. (``nhmsg.nh_group`` cannot see the
    flag, which the kernel puts after ``NHA_GROUP``, and trusts the byte.)
    """
    out = []
    for pos in range(0, len(payload) - NEXTHOP_GRP.size + 1, NEXTHOP_GRP.size):
        nh_id, low, high, _ = NEXTHOP_GRP.unpack_from(payload, pos)
        out.append((nh_id, ((high if weight_high else 0) << 8 | low) + 1))
    return out


def encode_nexthop(spec: NexthopSpec, *, flags: int = CREATE_OR_REPLACE, seq: int = 0) -> bytes:
    """An RTM_NEWNEXTHOP request for a single nexthop (create or replace by default)."""
    _check_range("nexthop.id", spec.id, 0, 0xFFFFFFFF)
    parts = [attr_u32(NHA_ID, spec.id)]
    if spec.blackhole:
        parts.append(attr_flag(NHA_BLACKHOLE))
    if spec.fdb:
        parts.append(attr_flag(NHA_FDB))
    if spec.oif:
        parts.append(attr_u32(NHA_OIF, spec.oif))
    if spec.gateway is not None:
        want = socket.AF_INET if spec.gateway.version == 4 else socket.AF_INET6
        if spec.family != want:
            raise ValueError(f"nexthop.family: {spec.family} does not match gateway {spec.gateway}")
        parts.append(attr(NHA_GATEWAY, spec.gateway.packed))
    nh_flags = RTNH_F_ONLINK if spec.onlink else 0
    body = NHMSG.pack(spec.family, 0, spec.protocol, 0, nh_flags) + b"".join(parts)
    return message(RTM_NEWNEXTHOP, flags, body, seq)


def encode_group(spec: GroupSpec, *, flags: int = CREATE_OR_REPLACE, seq: int = 0) -> bytes:
    """An RTM_NEWNEXTHOP request for a group (create or replace by default)."""
    _check_range("group.id", spec.id, 0, 0xFFFFFFFF)
    if not spec.members:
        raise ValueError("group.members: a group needs at least one member")
    parts = [attr_u32(NHA_ID, spec.id), attr(NHA_GROUP, pack_group_entries(spec.members))]
    if spec.resilient:
        parts.append(attr_u16(NHA_GROUP_TYPE, NEXTHOP_GRP_TYPE_RES))
        parts.append(_res_group_attr(spec))
    if spec.fdb:
        parts.append(attr_flag(NHA_FDB))
    # A group's family must be AF_UNSPEC ("Invalid family for group").
    body = NHMSG.pack(socket.AF_UNSPEC, 0, spec.protocol, 0, 0) + b"".join(parts)
    return message(RTM_NEWNEXTHOP, flags, body, seq)


def _res_group_attr(spec: GroupSpec) -> bytes:
    children = []
    if spec.buckets is not None:
        _check_range("group.buckets", spec.buckets, 1, 0xFFFF)
        children.append(attr_u16(NHA_RES_GROUP_BUCKETS, spec.buckets))
    if spec.idle_timer is not None:
        _check_range("group.idle_timer", spec.idle_timer, 0, TIMER_MAX_SECONDS)
        children.append(attr_u32(NHA_RES_GROUP_IDLE_TIMER, spec.idle_timer * USER_HZ))
    if spec.unbalanced_timer is not None:
        _check_range("group.unbalanced_timer", spec.unbalanced_timer, 0, TIMER_MAX_SECONDS)
        children.append(attr_u32(NHA_RES_GROUP_UNBALANCED_TIMER, spec.unbalanced_timer * USER_HZ))
    return attr_nested(NHA_RES_GROUP, *children)


def encode_delete(nh_id: int, *, seq: int = 0) -> bytes:
    """An RTM_DELNEXTHOP request (nexthop or group, by id). Deleting a nexthop also
    removes it from every group, and deleting a group removes the routes that use it."""
    _check_range("nexthop.id", nh_id, 1, 0xFFFFFFFF)
    body = NHMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0) + attr_u32(NHA_ID, nh_id)
    return message(RTM_DELNEXTHOP, NLM_F_REQUEST | NLM_F_ACK, body, seq)


def encode_dump(*, family: int = socket.AF_UNSPEC, groups_only: bool = False, oif: int = 0, seq: int = 0) -> bytes:
    """An RTM_GETNEXTHOP dump request, optionally filtered (kernel-side) to groups or to a device."""
    parts = []
    if groups_only:
        parts.append(attr_flag(NHA_GROUPS))
    if oif:
        parts.append(attr_u32(NHA_OIF, oif))
    body = NHMSG.pack(family, 0, 0, 0, 0) + b"".join(parts)
    return message(RTM_GETNEXTHOP, NLM_F_REQUEST | NLM_F_DUMP, body, seq)


# --------------------------------------------------------------------------------------------
# Decoder


def decode_nexthop(msg: bytes) -> NexthopSpec | GroupSpec:
    """Decode an RTM_NEWNEXTHOP message (a dump reply, or a request as built above).

    A message that is not one, or cannot be read, raises ``ValueError`` (``MalformedMessage``), one line.
    """
    try:
        return _decode_nexthop(msg)
    except (struct.error, ValueError) as exc:
        raise MalformedMessage("RTM_NEWNEXTHOP", msg, exc) from None


def _decode_nexthop(msg: bytes) -> NexthopSpec | GroupSpec:
    length, kind, _flags, _seq, _pid = NLMSGHDR.unpack_from(msg, 0)
    if kind != RTM_NEWNEXTHOP:
        raise ValueError(f"message.type: expected RTM_NEWNEXTHOP ({RTM_NEWNEXTHOP}), got {kind}")
    family, _scope, protocol, _resvd, nh_flags = NHMSG.unpack_from(msg, NLMSGHDR.size)
    attrs = attrs_of(msg, NLMSGHDR.size + NHMSG.size, length)
    nh_id = U32.unpack(attrs[NHA_ID])[0] if NHA_ID in attrs else 0
    if NHA_GROUP in attrs:
        return _decode_group(nh_id, protocol, attrs)
    gateway = attrs.get(NHA_GATEWAY)
    return NexthopSpec(
        id=nh_id,
        family=family,
        gateway=ip_address(gateway) if gateway else None,
        oif=U32.unpack(attrs[NHA_OIF])[0] if NHA_OIF in attrs else 0,
        blackhole=NHA_BLACKHOLE in attrs,
        fdb=NHA_FDB in attrs,
        onlink=bool(nh_flags & RTNH_F_ONLINK),
        protocol=protocol,
    )


def _decode_group(nh_id: int, protocol: int, attrs: dict[int, bytes]) -> GroupSpec:
    op_flags = U32.unpack(attrs[NHA_OP_FLAGS])[0] if NHA_OP_FLAGS in attrs else 0
    members = unpack_group_entries(attrs[NHA_GROUP], weight_high=bool(op_flags & NHA_OP_FLAG_RESP_GRP_RESVD_0))
    gtype = U16.unpack(attrs[NHA_GROUP_TYPE])[0] if NHA_GROUP_TYPE in attrs else NEXTHOP_GRP_TYPE_MPATH
    res: dict[str, Any] = {}
    if gtype == NEXTHOP_GRP_TYPE_RES and NHA_RES_GROUP in attrs:
        res = _decode_res_group(attrs[NHA_RES_GROUP])
    return GroupSpec(
        id=nh_id,
        members=tuple(members),
        resilient=gtype == NEXTHOP_GRP_TYPE_RES,
        fdb=NHA_FDB in attrs,
        protocol=protocol,
        **res,
    )


def _decode_res_group(payload: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, value in iter_attrs(payload, 0, len(payload)):
        if kind == NHA_RES_GROUP_BUCKETS:
            out["buckets"] = U16.unpack(value)[0]
        elif kind == NHA_RES_GROUP_IDLE_TIMER:
            out["idle_timer"] = round(U32.unpack(value)[0] / USER_HZ)
        elif kind == NHA_RES_GROUP_UNBALANCED_TIMER:
            out["unbalanced_timer"] = round(U32.unpack(value)[0] / USER_HZ)
        elif kind == NHA_RES_GROUP_UNBALANCED_TIME:
            out["unbalanced_time"] = round(U64.unpack(value)[0] / USER_HZ)
    return out
