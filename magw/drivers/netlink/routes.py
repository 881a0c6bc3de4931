"""Hand-packed rtnetlink messages for magw's routes, nexthops and groups, and their parsers.

Converts between the model (``magw.desired.state``: Route, Nexthop, NexthopGroup) and the
wire. Packing a route costs about a microsecond: struct packing only, no pyroute2 objects.

Routes (``struct rtmsg`` + ``RTA_*``): family AF_INET, protocol ``RTPROT_MAGW``, scope
universe; the table goes in ``rtm_table`` and always also in ``RTA_TABLE`` (needed above
255, where ``rtm_table`` is RT_TABLE_UNSPEC as iproute2 does); the metric in
``RTA_PRIORITY``; ``src`` in ``RTA_PREFSRC``; the path in ``RTA_NH_ID`` (a nexthop object or
group), ``RTA_GATEWAY`` + ``RTA_OIF`` (one inline path) or ``RTA_MULTIPATH`` (several:
``struct rtnexthop`` with ``hops = weight - 1`` followed by its ``RTA_GATEWAY``).
Unreachable routes have type RTN_UNREACHABLE and no path. A device-only path is an inline
nexthop with ``via`` 0.0.0.0 (no gateway). ``encap`` is ``RTA_ENCAP_TYPE`` LWTUNNEL_ENCAP_IP
plus ``RTA_ENCAP`` {LWTUNNEL_IP_ID (be64), LWTUNNEL_IP_DST} (the egress gateway's routes).

Ownership: parsers return None for what is not ours: routes of another protocol, in a
table outside ``OWNED_TABLES``, not IPv4; nexthops with ids outside our range.
"""

from __future__ import annotations

import functools
import socket
import struct
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import structlog

from magw.desired.state import GroupMember, Nexthop, NexthopGroup, Route, RouteEncap, RouteNexthop
from magw.drivers.netlink.constants import OWNED_TABLES, RTPROT_MAGW, owns_nexthop
from magw.drivers.netlink.nexthop import (
    GroupSpec,
    NexthopSpec,
    decode_nexthop,
    encode_group,
    encode_nexthop,
)
from magw.drivers.netlink.nlattr import (
    NLM_F_ACK,
    NLM_F_CREATE,
    NLM_F_DUMP,
    NLM_F_EXCL,
    NLM_F_REPLACE,
    NLM_F_REQUEST,
    NLMSGHDR,
    U16,
    U32,
    MalformedMessage,
    align4,
    attr,
    attr_u16,
    attr_u32,
    attrs_of,
    message,
)
from magw.model.netfast import network

log = structlog.get_logger(__name__)

RTM_NEWROUTE = 24
RTM_DELROUTE = 25
RTM_GETROUTE = 26

RTA_DST = 1
RTA_OIF = 4
RTA_GATEWAY = 5
RTA_PRIORITY = 6
RTA_PREFSRC = 7
RTA_MULTIPATH = 9
RTA_TABLE = 15
RTA_ENCAP_TYPE = 21
RTA_ENCAP = 22
RTA_NH_ID = 30
LWTUNNEL_ENCAP_IP = 2
LWTUNNEL_IP_ID = 1
LWTUNNEL_IP_DST = 2

RTN_UNSPEC = 0
RTN_UNICAST = 1
RTN_UNREACHABLE = 7

RT_SCOPE_UNIVERSE = 0
RT_SCOPE_NOWHERE = 255
RT_TABLE_UNSPEC = 0
RTM_F_CLONED = 0x200

# struct rtmsg {family, dst_len, src_len, tos, table, protocol, scope, type; u32 flags}
RTMSG = struct.Struct("=BBBBBBBBI")
# struct rtnexthop {u16 len; u8 flags; u8 hops; int ifindex}
RTNEXTHOP = struct.Struct("=HBBi")

FLAGS_CREATE = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
FLAGS_REPLACE = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE

IfIndex = Callable[[str], int]
IfName = Callable[[int], str]

NO_GATEWAY = IPv4Address(0)
_ZERO_DST = b"\0\0\0\0"
_HDR_LEN = NLMSGHDR.size + RTMSG.size


# --------------------------------------------------------------------------------------------
# Routes


def _keyed_head(route: Route, scope: int, rtm_type: int) -> list[bytes]:
    """The rtmsg header and the attributes that name a route to the kernel: table, dst, metric, our protocol."""
    dst = route.dst
    table_byte = route.table if route.table < 256 else RT_TABLE_UNSPEC
    head = RTMSG.pack(socket.AF_INET, dst.prefixlen, 0, 0, table_byte, RTPROT_MAGW, scope, rtm_type, 0)
    parts = [head, attr_u32(RTA_TABLE, route.table)]
    if dst.prefixlen:
        parts.append(attr(RTA_DST, dst.network_address.packed))
    parts.append(attr_u32(RTA_PRIORITY, route.metric))
    return parts


# The whole RTM_NEWROUTE of the common route (unicast via nhid, a dst prefix, with or without src) in ONE
# struct: nlmsghdr, rtmsg, RTA_TABLE, RTA_DST, RTA_PRIORITY, [RTA_PREFSRC], RTA_NH_ID. Byte-identical to
# the general path (tests/test_netlink_routes.py); at 100k routes, building each message from six ``attr``
# calls and joins was most of the route driver's Python time (docs/performance.md).
_NHID_ROUTE = struct.Struct("=IHHII BBBBBBBBI HHI HH4s HHI HHI")
_NHID_ROUTE_SRC = struct.Struct("=IHHII BBBBBBBBI HHI HH4s HHI HH4s HHI")


def _pack_nhid_route(route: Route, nhid: int, flags: int) -> bytes:
    # One pack call with every field spelled out: building the fields as a tuple in three parts and unpacking it
    # into the call took about twice as long (docs/performance.md: 270 -> 155 ms for 100k routes).
    dst = route.dst
    table = route.table
    table_byte = table if table < 256 else RT_TABLE_UNSPEC
    src = route.src
    if src is None:
        return _NHID_ROUTE.pack(
            _NHID_ROUTE.size, RTM_NEWROUTE, flags, 0, 0,
            socket.AF_INET, dst.prefixlen, 0, 0, table_byte, RTPROT_MAGW, RT_SCOPE_UNIVERSE, RTN_UNICAST, 0,
            8, RTA_TABLE, table, 8, RTA_DST, dst.network_address.packed, 8, RTA_PRIORITY, route.metric,
            8, RTA_NH_ID, nhid,
        )  # fmt: skip
    return _NHID_ROUTE_SRC.pack(
        _NHID_ROUTE_SRC.size, RTM_NEWROUTE, flags, 0, 0,
        socket.AF_INET, dst.prefixlen, 0, 0, table_byte, RTPROT_MAGW, RT_SCOPE_UNIVERSE, RTN_UNICAST, 0,
        8, RTA_TABLE, table, 8, RTA_DST, dst.network_address.packed, 8, RTA_PRIORITY, route.metric,
        8, RTA_PREFSRC, src.packed, 8, RTA_NH_ID, nhid,
    )  # fmt: skip


def pack_route(route: Route, ifindex: IfIndex, *, flags: int = FLAGS_REPLACE) -> bytes:
    """An RTM_NEWROUTE request for ``route``. ``flags`` picks create-exclusive or create-or-replace.

    Raises ValueError (naming the field) for a route the kernel could not express as given,
    and whatever ``ifindex`` raises for an unknown device.
    """
    nhid = route.nhid
    if nhid is not None and not route.nexthops and route.type != "unreachable" and route.dst.prefixlen:
        return _pack_nhid_route(route, nhid, flags)
    rtm_type = RTN_UNREACHABLE if route.type == "unreachable" else RTN_UNICAST
    parts = _keyed_head(route, RT_SCOPE_UNIVERSE, rtm_type)
    if route.src is not None:
        parts.append(attr(RTA_PREFSRC, route.src.packed))
    parts.append(_path_attrs(route, ifindex))
    if route.encap is not None:
        parts.append(_encap_attrs(route.encap))
    return message(RTM_NEWROUTE, flags, b"".join(parts))


def _encap_attrs(encap: RouteEncap) -> bytes:
    """``encap ip id ID dst DST``: the tunnel key goes big-endian, as the kernel keeps it (``__be64``)."""
    nested = attr(LWTUNNEL_IP_ID, encap.id.to_bytes(8, "big")) + attr(LWTUNNEL_IP_DST, encap.dst.packed)
    return attr_u16(RTA_ENCAP_TYPE, LWTUNNEL_ENCAP_IP) + attr(RTA_ENCAP, nested)


def _parse_encap(attrs: dict[int, bytes]) -> RouteEncap | None:
    kind = attrs.get(RTA_ENCAP_TYPE, b"")
    if RTA_ENCAP not in attrs or len(kind) < U16.size or U16.unpack_from(kind)[0] != LWTUNNEL_ENCAP_IP:
        return None
    nested = attrs_of(attrs[RTA_ENCAP], 0, len(attrs[RTA_ENCAP]))
    if LWTUNNEL_IP_DST not in nested:
        return None
    tun_id = int.from_bytes(nested.get(LWTUNNEL_IP_ID, bytes(8))[:8], "big")
    return RouteEncap(id=tun_id, dst=IPv4Address(nested[LWTUNNEL_IP_DST][:4]))


def _path_attrs(route: Route, ifindex: IfIndex) -> bytes:
    if route.type == "unreachable":
        if route.nhid is not None or route.nexthops:
            raise ValueError("route.type: an unreachable route has no nhid and no nexthops")
        return b""
    if route.nhid is not None:
        if route.nexthops:
            raise ValueError("route.nexthops: must be empty when nhid is set")
        return attr_u32(RTA_NH_ID, route.nhid)
    if len(route.nexthops) == 1:
        nh = route.nexthops[0]
        if nh.weight != 1:
            raise ValueError(f"route.nexthops: a single inline nexthop carries no weight, got {nh.weight}")
        return attr(RTA_GATEWAY, nh.via.packed) + attr_u32(RTA_OIF, ifindex(nh.dev))
    if not route.nexthops:
        raise ValueError("route.nexthops: a unicast route needs nhid or at least one nexthop")
    return attr(RTA_MULTIPATH, b"".join(_rtnexthop(nh, ifindex) for nh in route.nexthops))


def _rtnexthop(nh: RouteNexthop, ifindex: IfIndex) -> bytes:
    if not 1 <= nh.weight <= 256:
        raise ValueError(f"route.nexthops.weight: must be 1..256, got {nh.weight}")
    gateway = attr(RTA_GATEWAY, nh.via.packed)
    return RTNEXTHOP.pack(RTNEXTHOP.size + len(gateway), 0, nh.weight - 1, ifindex(nh.dev)) + gateway


def pack_route_delete(route: Route) -> bytes:
    """An RTM_DELROUTE request matching our route by table, dst, metric and protocol only.

    Scope RT_SCOPE_NOWHERE and type RTN_UNSPEC are the kernel's wildcards, so the path and
    type need not match; the protocol keeps a foreign route with the same key safe.
    """
    parts = _keyed_head(route, RT_SCOPE_NOWHERE, RTN_UNSPEC)
    return message(RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK, b"".join(parts))


def pack_route_dump() -> bytes:
    """An IPv4 route dump request that asks the kernel to send only our protocol.

    The filter needs NETLINK_GET_STRICT_CHK on the socket (kernel >= 4.20); without it the
    kernel sends every route and ``parse_route`` filters.
    """
    head = RTMSG.pack(socket.AF_INET, 0, 0, 0, RT_TABLE_UNSPEC, RTPROT_MAGW, 0, RTN_UNSPEC, 0)
    return message(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, head)


def parse_route(msg: bytes, ifname: IfName) -> Route | None:
    """The Route in an RTM_NEWROUTE message, or None when it is not ours.

    A route of ours with a type we never install (blackhole, prohibit, ...) comes back as a
    unicast route without a path, so the diff replaces or deletes it.
    """
    f = _nhid_src_fields(msg)
    if f is not None:  # the usual shape, read in one unpack
        if f[10] != RTPROT_MAGW or f[13] & RTM_F_CLONED or f[16] not in OWNED_TABLES:
            return None
        dst = _network(int.from_bytes(f[19], "big"), f[6])
        return Route(table=f[16], dst=dst, metric=f[22], src=_address(f[25]), nhid=f[28])
    try:
        return _parse_route(msg, ifname)
    except (struct.error, ValueError) as exc:  # truncated, an attribute of the wrong size, a prefix length > 32
        raise MalformedMessage("RTM_NEWROUTE", msg, exc) from None


def _parse_route(msg: bytes, ifname: IfName) -> Route | None:
    """``parse_route`` of any other layout: the attributes by type."""
    length, kind, _flags, _seq, _pid = NLMSGHDR.unpack_from(msg, 0)
    if kind != RTM_NEWROUTE or length < _HDR_LEN:
        return None
    family, dst_len, _src_len, _tos, table, proto, _scope, rtype, rflags = RTMSG.unpack_from(msg, NLMSGHDR.size)
    if family != socket.AF_INET or proto != RTPROT_MAGW or rflags & RTM_F_CLONED:
        return None
    attrs = attrs_of(msg, _HDR_LEN, length)
    if RTA_TABLE in attrs:
        table = U32.unpack(attrs[RTA_TABLE])[0]
    if table not in OWNED_TABLES:
        return None
    dst = _network(int.from_bytes(attrs.get(RTA_DST, _ZERO_DST), "big"), dst_len)
    metric = U32.unpack(attrs[RTA_PRIORITY])[0] if RTA_PRIORITY in attrs else 0
    src = _address(attrs[RTA_PREFSRC]) if RTA_PREFSRC in attrs else None
    if rtype == RTN_UNREACHABLE:
        return Route(table=table, dst=dst, metric=metric, src=src, type="unreachable")
    if rtype != RTN_UNICAST:
        log.warning("netlink.route_unexpected_type", table=table, dst=str(dst), metric=metric, rtm_type=rtype)
        return Route(table=table, dst=dst, metric=metric, src=src)
    if RTA_NH_ID in attrs:
        # With nexthop_compat_mode=1 (the default) the kernel also expands the group into
        # RTA_GATEWAY/RTA_MULTIPATH; the id is what we manage.
        return Route(table=table, dst=dst, metric=metric, src=src, nhid=U32.unpack(attrs[RTA_NH_ID])[0])
    paths = _parse_paths(attrs, ifname)
    return Route(table=table, dst=dst, metric=metric, src=src, nexthops=paths, encap=_parse_encap(attrs))


# The layout the kernel dumps our route via nhid with src in: (len, type) of RTA_TABLE, RTA_DST, RTA_PRIORITY,
# RTA_PREFSRC and RTA_NH_ID, at fixed offsets (RTA_MULTIPATH of nexthop_compat_mode follows and is not needed).
# Read with one struct instead of an attribute dict: most of a 100k-route observe was that (docs/performance.md).
_NHID_SRC_LENGTHS = (8, 8, 8, 8, 8)
_NHID_SRC_TYPES = (RTA_TABLE, RTA_DST, RTA_PRIORITY, RTA_PREFSRC, RTA_NH_ID)


def _nhid_src_fields(msg: bytes) -> tuple[Any, ...] | None:
    """The fields of ``_NHID_ROUTE_SRC`` when ``msg`` is a unicast IPv4 RTM_NEWROUTE in that layout, else None."""
    if len(msg) < _NHID_ROUTE_SRC.size:
        return None
    f = _NHID_ROUTE_SRC.unpack_from(msg, 0)
    if f[1] != RTM_NEWROUTE or f[0] < _NHID_ROUTE_SRC.size or f[5] != socket.AF_INET or f[12] != RTN_UNICAST:
        return None
    return f if f[14::3] == _NHID_SRC_LENGTHS and f[15::3] == _NHID_SRC_TYPES else None


@functools.lru_cache(maxsize=1 << 18)
def _network(address: int, prefixlen: int) -> IPv4Network:
    """IPv4Network is immutable and costs ~3 us to build; a resync dumps the same prefixes again and again
    (``magw.model.netfast``: a first dump builds each one in about a third of that)."""
    return network(address, prefixlen)


@functools.lru_cache(maxsize=1 << 12)
def _address(packed: bytes) -> IPv4Address:
    """A node's routes share a handful of src addresses: 100k dumped routes built 100k equal IPv4Address."""
    return IPv4Address(packed)


def _parse_paths(attrs: dict[int, bytes], ifname: IfName) -> tuple[RouteNexthop, ...]:
    if RTA_MULTIPATH in attrs:
        return _parse_multipath(attrs[RTA_MULTIPATH], ifname)
    if RTA_GATEWAY in attrs or RTA_OIF in attrs:
        gateway = attrs.get(RTA_GATEWAY)
        oif = U32.unpack(attrs[RTA_OIF])[0] if RTA_OIF in attrs else 0
        return (RouteNexthop(via=IPv4Address(gateway) if gateway else NO_GATEWAY, dev=ifname(oif)),)
    return ()


def _parse_multipath(payload: bytes, ifname: IfName) -> tuple[RouteNexthop, ...]:
    out = []
    pos = 0
    while pos + RTNEXTHOP.size <= len(payload):
        rtnh_len, _flags, hops, oif = RTNEXTHOP.unpack_from(payload, pos)
        if rtnh_len < RTNEXTHOP.size:
            break
        sub = attrs_of(payload, pos + RTNEXTHOP.size, pos + rtnh_len)
        gateway = sub.get(RTA_GATEWAY)
        out.append(RouteNexthop(via=IPv4Address(gateway) if gateway else NO_GATEWAY, dev=ifname(oif), weight=hops + 1))
        pos += align4(rtnh_len)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Nexthops and groups


def nexthop_spec(nh: Nexthop, ifindex: IfIndex) -> NexthopSpec:
    """The wire description of a nexthop object of ours (tagged with our protocol)."""
    return NexthopSpec(id=nh.id, gateway=nh.via, oif=ifindex(nh.dev), protocol=RTPROT_MAGW)


def group_spec(group: NexthopGroup) -> GroupSpec:
    """The wire description of a group of ours. A resilient group sends all its parameters,
    so what the kernel reports back equals the model (no kernel defaults sneak in)."""
    members = tuple((m.id, m.weight) for m in group.members)
    if group.type != "resilient":
        return GroupSpec(id=group.id, members=members, protocol=RTPROT_MAGW)
    if group.buckets < 1:
        raise ValueError(f"group.buckets: a resilient group needs at least 1 bucket, got {group.buckets}")
    return GroupSpec(
        id=group.id,
        members=members,
        resilient=True,
        buckets=group.buckets,
        idle_timer=group.idle_timer,
        unbalanced_timer=group.unbalanced_timer,
        protocol=RTPROT_MAGW,
    )


def pack_nexthop(nh: Nexthop, ifindex: IfIndex) -> bytes:
    """RTM_NEWNEXTHOP create-or-replace for a nexthop (ids in our range are ours by definition)."""
    return encode_nexthop(nexthop_spec(nh, ifindex))


def pack_group(group: NexthopGroup) -> bytes:
    """RTM_NEWNEXTHOP create-or-replace for a group. Its members must exist, earlier in the batch at the latest."""
    return encode_group(group_spec(group))


def parse_nexthop(msg: bytes, ifname: IfName) -> Nexthop | NexthopGroup | None:
    """The Nexthop or NexthopGroup in an RTM_NEWNEXTHOP message, or None when its id is not ours.

    A nexthop of ours without an IPv4 gateway (blackhole, device-only, IPv6) comes back with
    ``via`` 0.0.0.0 (and ``dev`` "" without device), so the diff replaces or deletes it.
    """
    spec = decode_nexthop(msg)
    if not owns_nexthop(spec.id):
        return None
    if isinstance(spec, GroupSpec):
        resilient = spec.resilient
        return NexthopGroup(
            id=spec.id,
            members=tuple(GroupMember(id=i, weight=w) for i, w in spec.members),
            type="resilient" if resilient else "mpath",
            buckets=(spec.buckets or 0) if resilient else 0,
            idle_timer=(spec.idle_timer or 0) if resilient else 0,
            unbalanced_timer=(spec.unbalanced_timer or 0) if resilient else 0,
        )
    via = spec.gateway if isinstance(spec.gateway, IPv4Address) else NO_GATEWAY
    return Nexthop(id=spec.id, via=via, dev=ifname(spec.oif) if spec.oif else "")
