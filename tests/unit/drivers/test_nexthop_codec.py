"""Pure tests (no kernel) of the hand-packed netlink codecs: nexthops, groups, routes, acks."""

from __future__ import annotations

import socket
import struct
from ipaddress import IPv4Address, IPv4Network, IPv6Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magw.desired.node.ids import NEXTHOP_ID_MAX, NEXTHOP_ID_MIN
from magw.desired.state import GroupMember, Nexthop, NexthopGroup, Route, RouteNexthop
from magw.drivers.netlink import nexthop as nh
from magw.drivers.netlink import nlattr, routes
from magw.drivers.netlink.constants import OWNED_TABLES, RTPROT_MAGW

DEVICES = {"va": 2, "vb": 3, "vx-submariner": 7, "vxlan-tunnel": 8}
NAMES = {index: name for name, index in DEVICES.items()}

our_ids = st.integers(min_value=NEXTHOP_ID_MIN, max_value=NEXTHOP_ID_MAX)
ipv4 = st.integers(min_value=0, max_value=2**32 - 1).map(IPv4Address)
devs = st.sampled_from(sorted(DEVICES))
u32 = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def networks(draw: st.DrawFn) -> IPv4Network:
    prefix = draw(st.integers(min_value=0, max_value=32))
    addr = draw(u32) & ((0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF)
    return IPv4Network((addr, prefix))


nexthops = st.builds(Nexthop, id=our_ids, via=ipv4, dev=devs)
members = st.lists(
    st.builds(GroupMember, id=our_ids, weight=st.integers(min_value=1, max_value=256)), min_size=1, max_size=8
).map(tuple)
mpath_groups = st.builds(NexthopGroup, id=our_ids, members=members, type=st.just("mpath"))
resilient_groups = st.builds(
    NexthopGroup,
    id=our_ids,
    members=members,
    type=st.just("resilient"),
    buckets=st.integers(min_value=1, max_value=0xFFFF),
    idle_timer=st.integers(min_value=0, max_value=nh.TIMER_MAX_SECONDS),
    unbalanced_timer=st.integers(min_value=0, max_value=nh.TIMER_MAX_SECONDS),
)
route_paths = st.one_of(
    st.fixed_dictionaries({"type": st.just("unreachable")}),
    st.fixed_dictionaries({"nhid": st.integers(min_value=1, max_value=2**32 - 1)}),
    st.fixed_dictionaries({"nexthops": st.tuples(st.builds(RouteNexthop, via=ipv4, dev=devs))}),
    st.fixed_dictionaries(
        {
            "nexthops": st.lists(
                st.builds(RouteNexthop, via=ipv4, dev=devs, weight=st.integers(min_value=1, max_value=256)),
                min_size=2,
                max_size=6,
            ).map(tuple)
        }
    ),
)


@st.composite
def owned_routes(draw: st.DrawFn) -> Route:
    return Route(
        table=draw(st.sampled_from(sorted(OWNED_TABLES))),
        dst=draw(networks()),
        metric=draw(u32),
        src=draw(st.none() | ipv4),
        **draw(route_paths),
    )


def _header(msg: bytes) -> tuple[int, int, int, int, int]:
    return nlattr.NLMSGHDR.unpack_from(msg, 0)


# -- round trips --------------------------------------------------------------------------------


@given(owned_routes())
def test_route_round_trips(route: Route) -> None:
    """parse_route(pack_route(r)) == r for every route shape we install (nhid, inline, multipath, unreachable)."""
    msg = routes.pack_route(route, DEVICES.__getitem__)
    assert routes.parse_route(msg, NAMES.__getitem__) == route


@given(nexthops)
def test_nexthop_round_trips(obj: Nexthop) -> None:
    """parse_nexthop(pack_nexthop(n)) == n for nexthop objects in our id range."""
    msg = routes.pack_nexthop(obj, DEVICES.__getitem__)
    assert routes.parse_nexthop(msg, NAMES.__getitem__) == obj


@given(st.one_of(mpath_groups, resilient_groups))
def test_group_round_trips(group: NexthopGroup) -> None:
    """Plain and resilient groups (buckets, idle and unbalanced timers in seconds) survive pack then parse."""
    msg = routes.pack_group(group)
    assert routes.parse_nexthop(msg, NAMES.__getitem__) == group


@given(st.one_of(mpath_groups, resilient_groups))
def test_pyroute2_nhmsg_decodes_our_groups(group: NexthopGroup) -> None:
    """pyroute2's decoder with our nhmsg class reads what the fast encoder wrote, field by field."""
    msg = nh.nhmsg(routes.pack_group(group))
    msg.decode()
    assert msg.get_attr("NHA_ID") == group.id
    assert msg.get_attr("NHA_GROUP") == [{"id": m.id, "weight": m.weight} for m in group.members]
    assert msg["family"] == socket.AF_UNSPEC
    assert msg["protocol"] == RTPROT_MAGW
    if group.type == "resilient":
        assert msg.get_attr("NHA_GROUP_TYPE") == nh.NEXTHOP_GRP_TYPE_RES
        res = msg.get_attr("NHA_RES_GROUP")
        assert res.get_attr("NHA_RES_GROUP_BUCKETS") == group.buckets
        assert res.get_attr("NHA_RES_GROUP_IDLE_TIMER") == group.idle_timer * nh.USER_HZ
        assert res.get_attr("NHA_RES_GROUP_UNBALANCED_TIMER") == group.unbalanced_timer * nh.USER_HZ
    else:
        assert msg.get_attr("NHA_GROUP_TYPE") is None


def test_pyroute2_nhmsg_encodes_the_same_bytes() -> None:
    """A resilient group built with pyroute2's API and our nhmsg class is byte-identical to encode_group."""
    spec = nh.GroupSpec(id=5, members=((1, 1), (2, 300)), resilient=True, buckets=32, idle_timer=7, unbalanced_timer=20)
    msg = nh.nhmsg()
    msg["header"]["type"] = nh.RTM_NEWNEXTHOP
    msg["header"]["flags"] = nh.CREATE_OR_REPLACE
    msg["family"] = socket.AF_UNSPEC
    msg["attrs"] = [
        ("NHA_ID", 5),
        ("NHA_GROUP", [{"id": 1, "weight": 1}, {"id": 2, "weight": 300}]),
        ("NHA_GROUP_TYPE", nh.NEXTHOP_GRP_TYPE_RES),
        (
            "NHA_RES_GROUP",
            {
                "attrs": [
                    ("NHA_RES_GROUP_BUCKETS", 32),
                    ("NHA_RES_GROUP_IDLE_TIMER", 700),
                    ("NHA_RES_GROUP_UNBALANCED_TIMER", 2000),
                ]
            },
        ),
    ]
    msg.encode()
    assert bytes(msg.data) == nh.encode_group(spec)


def test_pyroute2_nhmsg_decodes_a_gateway_nexthop() -> None:
    """nhmsg decodes NHA_GATEWAY to text and NHA_OIF to the index, for IPv4 and IPv6."""
    for gateway, family in ((IPv4Address("10.0.0.2"), socket.AF_INET), (IPv6Address("fd00::2"), socket.AF_INET6)):
        msg = nh.nhmsg(nh.encode_nexthop(nh.NexthopSpec(id=9, family=family, gateway=gateway, oif=3)))
        msg.decode()
        assert (msg["family"], msg.get_attr("NHA_GATEWAY"), msg.get_attr("NHA_OIF")) == (family, str(gateway), 3)


# -- 16-bit weights -----------------------------------------------------------------------------


def _reply_with_op_flags(request: bytes, op_flags: int) -> bytes:
    """A dump-like reply: the request plus an NHA_OP_FLAGS attribute, as kernels >= 6.12 send."""
    body = request[nlattr.NLMSGHDR.size :] + nlattr.attr_u32(nh.NHA_OP_FLAGS, op_flags)
    return nlattr.message(nh.RTM_NEWNEXTHOP, nlattr.NLM_F_MULTI, body)


def test_weight_high_is_trusted_only_when_the_kernel_says_so() -> None:
    """Weights above 256 use weight_high; it is read only with NHA_OP_FLAG_RESP_GRP_RESVD_0 (older
    kernels did not promise to zero that byte), else only the low byte counts."""
    request = nh.encode_group(nh.GroupSpec(id=5, members=((1, 300), (2, 65536))))
    flagged = nh.decode_nexthop(_reply_with_op_flags(request, nh.NHA_OP_FLAG_RESP_GRP_RESVD_0))
    unflagged = nh.decode_nexthop(_reply_with_op_flags(request, 0))
    assert isinstance(flagged, nh.GroupSpec) and isinstance(unflagged, nh.GroupSpec)
    assert flagged.members == ((1, 300), (2, 65536))
    assert unflagged.members == ((1, 44), (2, 256))


def test_group_entry_layout() -> None:
    """struct nexthop_grp on the wire: u32 id, u8 (weight-1) low byte, u8 high byte, u16 zero."""
    assert nh.pack_group_entries(((7, 1), (8, 300))) == struct.pack("=IBBH", 7, 0, 0, 0) + struct.pack(
        "=IBBH", 8, 43, 1, 0
    )


# -- wire details -------------------------------------------------------------------------------


def test_route_header_and_table_above_255() -> None:
    """A table above 255 goes in RTA_TABLE with rtm_table RT_TABLE_UNSPEC; protocol and scope are ours."""
    route = Route(table=1000, dst=IPv4Network("10.1.0.0/16"), metric=100, nhid=0x63000001)
    msg = routes.pack_route(route, DEVICES.__getitem__)
    length, kind, flags, _seq, _pid = _header(msg)
    family, dst_len, _s, _t, table, proto, scope, rtype, _f = routes.RTMSG.unpack_from(msg, nlattr.NLMSGHDR.size)
    attrs = nlattr.attrs_of(msg, nlattr.NLMSGHDR.size + routes.RTMSG.size, length)
    assert (kind, flags) == (routes.RTM_NEWROUTE, routes.FLAGS_REPLACE)
    assert (family, dst_len, table, proto, scope, rtype) == (socket.AF_INET, 16, 0, RTPROT_MAGW, 0, routes.RTN_UNICAST)
    assert attrs[routes.RTA_TABLE] == struct.pack("=I", 1000)
    assert attrs[routes.RTA_NH_ID] == struct.pack("=I", 0x63000001)
    assert attrs[routes.RTA_PRIORITY] == struct.pack("=I", 100)


def test_route_delete_matches_by_key_and_protocol() -> None:
    """RTM_DELROUTE carries table, dst, metric and our protocol, with the kernel's wildcards for scope and type."""
    route = Route(table=100, dst=IPv4Network("10.1.0.0/16"), metric=98, nhid=7)
    msg = routes.pack_route_delete(route)
    length, kind, _flags, _seq, _pid = _header(msg)
    _fam, dst_len, _s, _t, table, proto, scope, rtype, _f = routes.RTMSG.unpack_from(msg, nlattr.NLMSGHDR.size)
    attrs = nlattr.attrs_of(msg, nlattr.NLMSGHDR.size + routes.RTMSG.size, length)
    assert kind == routes.RTM_DELROUTE
    assert (dst_len, table, proto, scope, rtype) == (16, 100, RTPROT_MAGW, routes.RT_SCOPE_NOWHERE, routes.RTN_UNSPEC)
    assert sorted(attrs) == [routes.RTA_DST, routes.RTA_PRIORITY, routes.RTA_TABLE]
    assert attrs[routes.RTA_DST] == IPv4Address("10.1.0.0").packed


def test_parse_route_skips_what_is_not_ours() -> None:
    """Routes of another protocol, in a table we do not own, or of another family parse to None."""
    route = Route(table=100, dst=IPv4Network("10.1.0.0/16"), metric=1, nhid=7)
    ours = bytearray(routes.pack_route(route, DEVICES.__getitem__))
    offset = nlattr.NLMSGHDR.size
    foreign_proto = bytearray(ours)
    foreign_proto[offset + 5] = 4  # rtm_protocol = RTPROT_STATIC
    foreign_family = bytearray(ours)
    foreign_family[offset] = socket.AF_INET6
    other_table = routes.pack_route(
        Route(table=200, dst=IPv4Network("10.1.0.0/16"), metric=1, nhid=7), DEVICES.__getitem__
    )
    assert routes.parse_route(bytes(ours), NAMES.__getitem__) == route
    assert routes.parse_route(bytes(foreign_proto), NAMES.__getitem__) is None
    assert routes.parse_route(bytes(foreign_family), NAMES.__getitem__) is None
    assert routes.parse_route(other_table, NAMES.__getitem__) is None


def test_parse_nexthop_skips_foreign_ids() -> None:
    """A nexthop or group whose id is outside our range parses to None."""
    foreign = nh.encode_nexthop(nh.NexthopSpec(id=5, gateway=IPv4Address("10.0.0.2"), oif=2))
    foreign_group = nh.encode_group(nh.GroupSpec(id=NEXTHOP_ID_MAX + 1, members=((5, 1),)))
    assert routes.parse_nexthop(foreign, NAMES.__getitem__) is None
    assert routes.parse_nexthop(foreign_group, NAMES.__getitem__) is None


def test_blackhole_nexthop_of_ours_parses_as_placeholder() -> None:
    """A blackhole nexthop in our range comes back with via 0.0.0.0 and no device, so a diff removes it."""
    msg = nh.encode_nexthop(nh.NexthopSpec(id=NEXTHOP_ID_MAX, family=socket.AF_UNSPEC, blackhole=True))
    assert routes.parse_nexthop(msg, NAMES.__getitem__) == Nexthop(id=NEXTHOP_ID_MAX, via=IPv4Address(0), dev="")


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "field"),
    [
        (Route(table=100, dst=IPv4Network("10.0.0.0/8"), metric=1, type="unreachable", nhid=5), "route.type"),
        (
            Route(
                table=100,
                dst=IPv4Network("10.0.0.0/8"),
                metric=1,
                nhid=5,
                nexthops=(RouteNexthop(via=IPv4Address(1), dev="va"),),
            ),
            "route.nexthops",
        ),
        (Route(table=100, dst=IPv4Network("10.0.0.0/8"), metric=1), "route.nexthops"),
        (
            Route(
                table=100,
                dst=IPv4Network("10.0.0.0/8"),
                metric=1,
                nexthops=(RouteNexthop(via=IPv4Address(1), dev="va", weight=2),),
            ),
            "route.nexthops",
        ),
        (
            Route(
                table=100,
                dst=IPv4Network("10.0.0.0/8"),
                metric=1,
                nexthops=(
                    RouteNexthop(via=IPv4Address(1), dev="va", weight=257),
                    RouteNexthop(via=IPv4Address(2), dev="va"),
                ),
            ),
            "route.nexthops.weight",
        ),
    ],
)
def test_bad_routes_name_the_field(route: Route, field: str) -> None:
    """A route the kernel cannot express as given is refused with one line naming the field."""
    with pytest.raises(ValueError, match=rf"^{field}: "):
        routes.pack_route(route, DEVICES.__getitem__)


@pytest.mark.parametrize(
    ("group", "field"),
    [
        (NexthopGroup(id=NEXTHOP_ID_MIN, members=(), type="mpath"), "group.members"),
        (NexthopGroup(id=NEXTHOP_ID_MIN, members=(GroupMember(id=1, weight=0),)), "group.members.weight"),
        (NexthopGroup(id=NEXTHOP_ID_MIN, members=(GroupMember(id=1),), type="resilient", buckets=0), "group.buckets"),
        (
            NexthopGroup(id=NEXTHOP_ID_MIN, members=(GroupMember(id=1),), type="resilient", buckets=8, idle_timer=-1),
            "group.idle_timer",
        ),
    ],
)
def test_bad_groups_name_the_field(group: NexthopGroup, field: str) -> None:
    """A group with no members, a zero weight, no buckets or a negative timer is refused naming the field."""
    with pytest.raises(ValueError, match=rf"^{field}: "):
        routes.pack_group(group)


def test_gateway_family_must_match() -> None:
    """An IPv6 gateway with family AF_INET is refused before anything is sent."""
    with pytest.raises(ValueError, match=r"^nexthop.family: "):
        nh.encode_nexthop(nh.NexthopSpec(id=1, gateway=IPv6Address("fd00::1"), oif=2))


# -- acks ---------------------------------------------------------------------------------------


def _ack(error: int, flags: int, request: bytes, tlvs: bytes = b"") -> bytes:
    inner = request[: nlattr.NLMSGHDR.size] if flags & nlattr.NLM_F_CAPPED else request
    body = struct.pack("=i", error) + inner + tlvs
    return nlattr.message(nlattr.NLMSG_ERROR, flags, body, seq=42)


def test_parse_error_reads_errno_and_extended_ack_message() -> None:
    """An NLMSG_ERROR ack gives the positive errno and the kernel's message, capped or not."""
    request = nh.encode_delete(NEXTHOP_ID_MIN)
    text = nlattr.attr(nlattr.NLMSGERR_ATTR_MSG, b"Nexthop id does not exist\0")
    for flags in (nlattr.NLM_F_CAPPED | nlattr.NLM_F_ACK_TLVS, nlattr.NLM_F_ACK_TLVS):
        msg = _ack(-2, flags, request, text)
        assert nlattr.parse_error(msg, 0, len(msg), flags) == (2, "Nexthop id does not exist")
    plain = _ack(0, nlattr.NLM_F_CAPPED, request)
    assert nlattr.parse_error(plain, 0, len(plain), nlattr.NLM_F_CAPPED) == (0, "")


def test_iter_messages_walks_a_batch() -> None:
    """Several messages in one buffer are found with their type, flags, seq, offset and length."""
    first = nlattr.message(nh.RTM_DELNEXTHOP, 5, b"abcde", seq=1)
    second = nlattr.message(nh.RTM_GETNEXTHOP, 1, b"", seq=2)
    buf = first + b"\0" * (nlattr.align4(len(first)) - len(first)) + second
    assert list(nlattr.iter_messages(buf, len(buf))) == [
        (nh.RTM_DELNEXTHOP, 5, 1, 0, 21),
        (nh.RTM_GETNEXTHOP, 1, 2, 24, 16),
    ]


@pytest.mark.parametrize("src", [None, IPv4Address("10.1.3.1")])
@pytest.mark.parametrize("table", [100, 254, 1000])
def test_pyroute2_rtmsg_encodes_the_same_route_bytes(src: IPv4Address | None, table: int) -> None:
    """A route via nhid (the one-struct fast path of pack_route) is byte-identical to pyroute2's rtmsg encoding
    (pyroute2 0.9.7 has no RTA_NH_ID: that last attribute is packed here from rtnetlink.h, type 30)."""
    from pyroute2.netlink.rtnl.rtmsg import rtmsg

    route = Route(table=table, dst=IPv4Network("11.2.3.0/24"), metric=100, src=src, nhid=0x63000001)
    for verb_flags in (routes.FLAGS_CREATE, routes.FLAGS_REPLACE):
        msg = rtmsg()
        msg["header"]["type"] = routes.RTM_NEWROUTE
        msg["header"]["flags"] = verb_flags
        msg.update(family=socket.AF_INET, dst_len=24, table=table if table < 256 else 0, proto=RTPROT_MAGW)
        msg.update(scope=0, type=routes.RTN_UNICAST)
        pairs = [("RTA_TABLE", table), ("RTA_DST", "11.2.3.0"), ("RTA_PRIORITY", 100)]
        pairs += [("RTA_PREFSRC", str(src))] if src is not None else []
        msg["attrs"] = pairs
        msg.encode()
        body = bytes(msg.data)[16:] + struct.pack("=HHI", 8, 30, 0x63000001)
        expected = struct.pack("=IHHII", 16 + len(body), routes.RTM_NEWROUTE, verb_flags, 0, 0) + body
        assert routes.pack_route(route, DEVICES.__getitem__, flags=verb_flags) == expected


def _dumped(attrs: list[tuple[int, bytes]], *, proto: int = RTPROT_MAGW, flags: int = 0, table: int = 0) -> bytes:
    """An RTM_NEWROUTE as the kernel dumps it: rtmsg, then the attributes in the order given."""
    head = struct.pack("=BBBBBBBBI", socket.AF_INET, 24, 0, 0, table, proto, 0, routes.RTN_UNICAST, flags)
    body = head + b"".join(struct.pack("=HH", 4 + len(v), k) + v + b"\0" * (-len(v) % 4) for k, v in attrs)
    return struct.pack("=IHHII", 16 + len(body), routes.RTM_NEWROUTE, 2, 1, 0) + body


def test_dumped_routes_in_the_kernels_layout_and_in_any_other_read_the_same() -> None:
    """A route via nhid with src, attributes in the kernel's order (table, dst, metric, src, nh id, then the
    compat RTA_MULTIPATH) or shuffled, reads as the same Route; another protocol, a cloned route or a
    table not ours read as None in either layout."""
    u32 = struct.Struct("=I").pack
    multipath = struct.pack("=HBBi", 16, 0, 0, 3) + struct.pack("=HH", 8, 5) + bytes([172, 18, 0, 5])
    kernel = [(15, u32(100)), (1, bytes([11, 2, 3, 0])), (6, u32(100)), (7, bytes([10, 1, 3, 1])), (30, u32(77))]
    want = Route(table=100, dst=IPv4Network("11.2.3.0/24"), metric=100, src=IPv4Address("10.1.3.1"), nhid=77)
    for attrs in ([*kernel, (9, multipath)], kernel, [*reversed(kernel), (9, multipath)]):
        assert routes.parse_route(_dumped(attrs), DEVICES.__getitem__) == want
        assert routes.parse_route(_dumped(attrs, proto=3), DEVICES.__getitem__) is None
        assert routes.parse_route(_dumped(attrs, flags=routes.RTM_F_CLONED), DEVICES.__getitem__) is None
        foreign = [(15, u32(200)) if k == 15 else (k, v) for k, v in attrs]
        assert routes.parse_route(_dumped(foreign), DEVICES.__getitem__) is None
