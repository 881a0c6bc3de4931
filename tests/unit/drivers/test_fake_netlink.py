"""FakeNetlink: the driver semantics and the kernel's refusals, each with its errno and message."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network

import attrs
import pytest

from magw.desired.state import (
    Address,
    DesiredState,
    GroupMember,
    Link,
    NetObject,
    Nexthop,
    NexthopGroup,
    Route,
    RouteNexthop,
    Rule,
)
from magw.drivers.netlink.fake.checks import kind_of
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.reconcile.changeset import ChangeSet, Op
from magw.reconcile.diff import diff
from tests.support.fake_netlink_data import (
    ADDR,
    CNI_IP,
    DST,
    FDB,
    GROUP,
    GROUP_OBJ,
    INLINE,
    LINK,
    NEIGH,
    NEXTHOP1,
    NEXTHOP2,
    NEXTHOP3,
    NH1,
    NH2,
    ROUTE,
    RULE,
    STATE,
    TUNNEL,
    VT,
    VX,
    loaded,
    run,
    with_link,
)

# ---- driver semantics: idempotence


def test_create_of_identical_object_succeeds() -> None:
    """Create of an object that exists with the same content is a success that changes nothing."""
    fake = loaded()
    before = fake.dump()
    assert [run(fake, "create", obj) for obj in (LINK, ADDR, NEIGH, FDB, NEXTHOP1, GROUP_OBJ, ROUTE, RULE)] == [
        None
    ] * 8
    assert fake.dump() == before


@pytest.mark.parametrize(
    "obj",
    [
        attrs.evolve(LINK, mtu=1400),
        attrs.evolve(NEIGH, mac="02:53:f0:00:00:09"),
        attrs.evolve(FDB, dst=IPv4Address("172.18.0.9")),
        attrs.evolve(NEXTHOP1, via=IPv4Address("240.0.0.9")),
        attrs.evolve(ROUTE, src=None),
        Rule(priority=100, table=101),
    ],
    ids=["link", "neighbor", "fdb", "nexthop", "route", "rule"],
)
def test_create_over_different_content_of_ours_replaces_it(obj: NetObject) -> None:
    """Driver semantics: create means "make it exist with exactly this content", like replace; the other
    objects stay (the kernel driver does the same: tests/kernel/test_driver_contract.py)."""
    fake = loaded()
    assert run(fake, "create", obj) is None
    kind = kind_of(obj)
    others = [o for o in STATE.of_kind(kind) if o.key != obj.key]
    assert fake.observe() == attrs.evolve(STATE, **{kind: sorted([*others, obj], key=lambda o: o.key)})


def test_create_of_a_nexthop_on_a_group_id_is_einval() -> None:
    """Nexthops and groups share one id space: a nexthop cannot take a group's id, as NLM_F_REPLACE refuses."""
    fake = loaded()
    assert (
        run(fake, "create", attrs.evolve(NEXTHOP1, id=GROUP))
        == f"EINVAL: Can not replace a nexthop group with a nexthop (id {GROUP})"
    )
    assert fake.observe() == STATE


def test_replace_of_missing_object_creates_it() -> None:
    """Replace behaves as NLM_F_CREATE|NLM_F_REPLACE: a missing object is created."""
    fake = FakeNetlink(check_prefsrc=False)
    ops = tuple(
        Op(verb="replace", kind=kind, obj=obj)
        for kind in ("links", "addresses", "rules")
        for obj in STATE.of_kind(kind)
    )
    assert fake.apply(ChangeSet(ops=ops)).failed == ()
    assert fake.observe() == DesiredState(links=STATE.links, addresses=STATE.addresses, rules=STATE.rules)


def test_delete_of_missing_object_succeeds() -> None:
    """Delete of anything missing (even on a missing device) is a success."""
    fake = FakeNetlink()
    assert [run(fake, "delete", obj) for obj in (LINK, ADDR, NEIGH, FDB, NEXTHOP1, GROUP_OBJ, ROUTE, RULE)] == [
        None
    ] * 8


def test_apply_reports_applied_ops_and_continues_after_a_failure() -> None:
    """A failing op is a Failure naming the object; the ops after it still apply."""
    fake = FakeNetlink(check_prefsrc=False)
    bad = Address(dev=VT, address=IPv4Interface("241.0.0.1/8"))
    ops = (
        Op(verb="create", kind="links", obj=LINK),
        Op(verb="create", kind="addresses", obj=bad),
        Op(verb="create", kind="addresses", obj=ADDR),
    )
    result = fake.apply(ChangeSet(ops=ops))
    assert result.applied == (ops[0], ops[2])
    assert [f.describe() for f in result.failed] == [
        "create address vxlan-tunnel 241.0.0.1/8: ENODEV: Cannot find device 'vxlan-tunnel'"
    ]
    assert result.ok is False
    assert fake.observe() == DesiredState(links=[LINK], addresses=[ADDR])


# ---- the kernel's refusals


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        (ADDR, "ENODEV: Cannot find device 'vx-submariner'"),
        (NEIGH, "ENODEV: Cannot find device 'vx-submariner'"),
        (FDB, "ENODEV: Cannot find device 'vx-submariner'"),
        (NEXTHOP1, "ENODEV: Cannot find device 'vx-submariner'"),
        (INLINE, "ENODEV: Cannot find device 'vx-submariner'"),
    ],
    ids=["address", "neighbor", "fdb", "nexthop", "inline-route"],
)
def test_object_on_missing_link_is_enodev(obj: NetObject, error: str) -> None:
    """Anything naming a device that does not exist fails with ENODEV (the driver finds no ifindex)."""
    assert run(FakeNetlink(check_prefsrc=False), "create", obj) == error


def test_route_to_missing_nhid_is_einval() -> None:
    """Kernel: EINVAL "Nexthop id does not exist" for RTA_NH_ID naming no nexthop."""
    assert run(with_link(), "create", ROUTE) == f"EINVAL: Nexthop id does not exist (route 10.2.0.0/16 nhid {GROUP})"


def test_group_with_missing_member_is_einval() -> None:
    """Kernel: EINVAL "Invalid nexthop id" for a group member that does not exist."""
    fake = with_link()
    assert run(fake, "create", NEXTHOP1) is None
    assert run(fake, "create", GROUP_OBJ) == f"EINVAL: Invalid nexthop id (group {GROUP} member {NH2} does not exist)"


@pytest.mark.parametrize(
    ("group", "error"),
    [
        (
            attrs.evolve(GROUP_OBJ, members=()),
            f"EINVAL: Invalid length for nexthop group attribute (group {GROUP} is empty)",
        ),
        (
            attrs.evolve(GROUP_OBJ, members=(GroupMember(id=NH1), GroupMember(id=NH1))),
            f"EINVAL: Nexthop id can not be used twice in a group (group {GROUP})",
        ),
        (
            attrs.evolve(GROUP_OBJ, members=(GroupMember(id=NH1, weight=0),)),
            f"EINVAL: Invalid value for weight (group {GROUP} member {NH1})",
        ),
        (
            attrs.evolve(GROUP_OBJ, members=(GroupMember(id=NH1),), buckets=0),
            f"EINVAL: Number of buckets needs to be non-0 (group {GROUP})",
        ),
    ],
    ids=["empty", "duplicate", "weight", "buckets"],
)
def test_malformed_group_is_einval(group: NexthopGroup, error: str) -> None:
    """The kernel's NHA_GROUP checks: empty, duplicate member, weight outside 1..256, zero buckets."""
    fake = with_link()
    assert run(fake, "create", NEXTHOP1) is None
    assert run(fake, "create", group) == error


def test_group_as_member_of_a_group_is_einval() -> None:
    """Groups cannot nest."""
    fake = loaded()
    nested = NexthopGroup(id=GROUP + 1, members=(GroupMember(id=GROUP),))
    assert run(fake, "create", nested) == f"EINVAL: A group can not be a nexthop within a group (member {GROUP})"


@pytest.mark.parametrize(
    ("new", "error"),
    [
        (
            attrs.evolve(GROUP_OBJ, type="mpath"),
            f"EINVAL: Can not replace a nexthop group with one of a different type (group {GROUP})",
        ),
        (
            attrs.evolve(GROUP_OBJ, buckets=64),
            f"EINVAL: Can not change number of buckets of a resilient nexthop group (group {GROUP})",
        ),
        (
            Nexthop(id=GROUP, via=IPv4Address("240.0.0.9"), dev=VX),
            f"EINVAL: Can not replace a nexthop group with a nexthop (id {GROUP})",
        ),
    ],
    ids=["type", "buckets", "group-to-nexthop"],
)
def test_group_replace_the_kernel_refuses(new: NetObject, error: str) -> None:
    """Replace cannot change a group's type or bucket count, nor turn a group into a nexthop."""
    fake = loaded()
    assert run(fake, "replace", new) == error
    assert fake.observe() == STATE


def test_nexthop_replaced_by_a_group_is_einval() -> None:
    """Replace cannot turn a nexthop into a group."""
    fake = loaded()
    new = NexthopGroup(id=NH1, members=(GroupMember(id=NH2),))
    assert run(fake, "replace", new) == f"EINVAL: Can not replace a nexthop with a nexthop group (id {NH1})"


def test_group_timers_change_in_place() -> None:
    """A resilient group's idle/unbalanced timers change with a plain replace."""
    fake = loaded()
    new = attrs.evolve(GROUP_OBJ, idle_timer=99, unbalanced_timer=5)
    assert run(fake, "replace", new) is None
    assert fake.get("groups", GROUP) == new


def test_member_nexthop_replaced_by_another_gateway_stays_in_its_group() -> None:
    """Kernel: a gateway nexthop that is a group member may be replaced by another gateway nexthop."""
    fake = loaded()
    moved = attrs.evolve(NEXTHOP1, via=IPv4Address("240.0.0.7"))
    assert run(fake, "replace", moved) is None
    assert fake.observe() == attrs.evolve(STATE, nexthops=[moved, NEXTHOP2, NEXTHOP3])


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        (
            Nexthop(id=NH2 + 7, via=IPv4Address("10.9.0.1"), dev=VX),
            "ENETUNREACH: Nexthop has invalid gateway (nexthop 1610612746 via 10.9.0.1 dev vx-submariner)",
        ),
        (
            attrs.evolve(INLINE, nexthops=(RouteNexthop(via=IPv4Address("10.9.0.1"), dev=VX),)),
            "ENETUNREACH: Nexthop has invalid gateway (route 100.2.0.0/16 via 10.9.0.1 dev vx-submariner)",
        ),
        (
            attrs.evolve(INLINE, nexthops=(RouteNexthop(via=IPv4Address("10.1.3.9"), dev=VX),)),
            "ENETUNREACH: Nexthop has invalid gateway (route 100.2.0.0/16 via 10.1.3.9 dev vx-submariner)",
        ),
    ],
    ids=["nexthop", "inline-route", "subnet-of-another-dev"],
)
def test_gateway_not_on_link_is_enetunreach(obj: NetObject, error: str) -> None:
    """A ``via`` outside every address subnet of its own device fails: "Nexthop has invalid gateway"."""
    assert run(with_link(), "create", obj) == error


def test_nexthop_on_a_down_link_is_enetdown() -> None:
    """Kernel: ENETDOWN "Nexthop device is not up"."""
    fake = FakeNetlink()
    fake.apply(diff(DesiredState(links=[attrs.evolve(LINK, up=False)], addresses=[ADDR]), fake.observe()))
    assert run(fake, "create", NEXTHOP1) == f"ENETDOWN: Nexthop device is not up (nexthop {NH1} dev vx-submariner)"


def test_route_src_must_be_a_local_address() -> None:
    """Kernel: EINVAL "Invalid prefsrc address" for a unicast route whose src no device holds."""
    fake = with_link()
    assert run(fake, "create", NEXTHOP1) is None
    route = Route(table=100, dst=DST, metric=100, src=IPv4Address("10.9.9.9"), nhid=NH1)
    assert run(fake, "create", route) == "EINVAL: Invalid prefsrc address (route 10.2.0.0/16 src 10.9.9.9)"
    assert run(fake, "create", attrs.evolve(route, src=CNI_IP)) is None
    unreachable = Route(
        table=100, dst=IPv4Network("10.3.0.0/16"), metric=100, type="unreachable", src=IPv4Address("10.9.9.9")
    )
    assert run(fake, "create", unreachable) is None  # the kernel does not check src of an unreachable route


def test_prefsrc_check_can_be_turned_off() -> None:
    """``check_prefsrc=False`` accepts any src (for tests that do not model the CNI side)."""
    fake = FakeNetlink(check_prefsrc=False)
    fake.apply(diff(DesiredState(links=[LINK], addresses=[ADDR], nexthops=[NEXTHOP1]), fake.observe()))
    assert run(fake, "create", Route(table=100, dst=DST, metric=100, src=IPv4Address("10.9.9.9"), nhid=NH1)) is None


@pytest.mark.parametrize(
    ("route", "error"),
    [
        (
            attrs.evolve(INLINE, nhid=NH1),
            "EINVAL: Nexthop specification and nexthop id are mutually exclusive (100.2.0.0/16)",
        ),
        (attrs.evolve(INLINE, nexthops=()), "ENODEV: No such device: route 100.2.0.0/16 has neither nhid nor nexthops"),
        (attrs.evolve(INLINE, type="unreachable"), "EINVAL: an unreachable route has no nexthop (route 100.2.0.0/16)"),
    ],
    ids=["both", "neither", "unreachable-with-path"],
)
def test_route_with_inconsistent_nexthop_fields_is_refused(route: Route, error: str) -> None:
    """A unicast route needs exactly one of nhid / inline paths; an unreachable route has none."""
    fake = with_link()
    assert run(fake, "create", NEXTHOP1) is None
    assert run(fake, "create", route) == error


@pytest.mark.parametrize(
    ("link", "error"),
    [
        (attrs.evolve(LINK, mtu=60), "EINVAL: mtu less than device minimum (vx-submariner mtu 60)"),
        (attrs.evolve(LINK, mtu=70000), "EINVAL: mtu greater than device maximum (vx-submariner mtu 70000)"),
        (attrs.evolve(LINK, vni=1 << 24), "ERANGE: VXLAN ID must be lower than 16777216 (vx-submariner id 16777216)"),
        (
            attrs.evolve(LINK, mac="01:00:5e:00:00:01"),
            "EADDRNOTAVAIL: Cannot assign requested address (vx-submariner address 01:00:5e:00:00:01)",
        ),
        (attrs.evolve(LINK, mac="02:53"), "EINVAL: invalid link-layer address '02:53'"),
    ],
    ids=["mtu-low", "mtu-high", "vni", "multicast-mac", "bad-mac"],
)
def test_bad_link_attributes_are_refused(link: Link, error: str) -> None:
    """The vxlan driver's limits: MTU 68..65535, VNI < 2^24, a unicast non-zero MAC."""
    assert run(FakeNetlink(), "create", link) == error


def test_vxlan_port_0_reads_back_8472() -> None:
    """Kernel 6.18 takes a VXLAN with port 0 and gives it Linux's default port 8472, with no message; a state
    asking for port 0 therefore never converges (the next diff recreates the link)."""
    fake = FakeNetlink()
    assert run(fake, "create", attrs.evolve(LINK, port=0)) is None
    assert fake.observe().links == (attrs.evolve(LINK, port=8472),)


@pytest.mark.parametrize("mac", ["01:00:5e:00:00:01", "33:33:00:00:00:01", "ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00"])
def test_fdb_entry_with_a_multicast_or_zero_mac_is_enotsup(mac: str) -> None:
    """The vxlan driver refuses NLM_F_REPLACE of a multicast or all-zero FDB MAC (EOPNOTSUPP, named ENOTSUP)."""
    fake = with_link()
    assert run(fake, "create", attrs.evolve(FDB, mac=mac)) == (
        f"ENOTSUP: Operation not supported (fdb {mac} dev vx-submariner: not a unicast MAC)"
    )
    assert fake.observe().fdb == ()


def test_second_vxlan_link_with_same_vni_and_port_is_eexist() -> None:
    """Kernel: EEXIST "A VXLAN device with the specified VNI already exists" (also against foreign links)."""
    fake = FakeNetlink()
    fake.add_foreign(Link(name="vx-other", vni=1000, port=4500, mtu=1500, mac="02:00:00:00:00:01"))
    assert run(fake, "create", TUNNEL) == "EEXIST: A VXLAN device with the specified VNI already exists (vx-other)"
    assert run(fake, "create", attrs.evolve(TUNNEL, port=4501)) is None


def test_op_on_an_object_we_do_not_own_is_refused() -> None:
    """apply() never touches foreign state: an op on a foreign name/table/id/priority fails with EPERM."""
    fake = FakeNetlink()
    eth0 = Link(name="eth0", vni=5, port=4789, mtu=1500, mac="02:00:00:00:00:05")
    assert run(fake, "create", eth0) == "EPERM: links eth0 is not owned by magw; refusing to touch it"
    assert (
        run(fake, "delete", Rule(priority=32766, table=254))
        == "EPERM: rules 32766 is not owned by magw; refusing to touch it"
    )
    assert fake.dump() == ""
