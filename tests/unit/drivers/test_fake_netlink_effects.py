"""FakeNetlink: the kernel's side effects, foreign state left alone, read-back normalization, helpers."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network

import attrs
import pytest

import magw.drivers.netlink.fake.namespace
from magw.desired.state import (
    Address,
    DesiredState,
    GroupMember,
    Neighbor,
    Nexthop,
    NexthopGroup,
    Route,
    RouteNexthop,
    Rule,
)
from magw.drivers.netlink.constants import RTPROT_MAGW
from magw.drivers.netlink.fake.namespace import NOT_MODELLED, RTPROT_BOOT, FakeNetlink, ForeignLink, KernelError
from magw.reconcile.diff import diff
from tests.support.fake_netlink_data import (
    ADDR,
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
    NH3,
    ROUTE,
    RULE,
    STATE,
    TUNNEL,
    TUNNEL_ADDR,
    VT,
    VX,
    loaded,
    run,
    with_link,
)

# ---- side effects


def test_link_delete_takes_everything_on_it() -> None:
    """Deleting a link deletes its addresses, neighbors, FDB, nexthops (leaving groups), and routes through it."""
    fake = loaded()
    assert run(fake, "delete", LINK) is None
    assert fake.observe() == DesiredState(links=[TUNNEL], addresses=[TUNNEL_ADDR], nexthops=[NEXTHOP3], rules=[RULE])


def test_nexthop_delete_shrinks_groups_and_keeps_their_routes() -> None:
    """Deleting a member nexthop removes it from the group; the group and its routes stay."""
    fake = loaded()
    assert run(fake, "delete", NEXTHOP1) is None
    assert fake.get("groups", GROUP) == attrs.evolve(GROUP_OBJ, members=(GroupMember(id=NH2),))
    assert fake.get("routes", ROUTE.key) == ROUTE


def test_last_member_delete_deletes_the_group_and_its_routes() -> None:
    """A group left empty is deleted, and with it every route that used it."""
    fake = loaded()
    assert run(fake, "delete", NEXTHOP1) is None
    assert run(fake, "delete", NEXTHOP2) is None
    assert fake.get("groups", GROUP) is None
    assert fake.get("routes", ROUTE.key) is None
    assert fake.get("routes", INLINE.key) == INLINE


def test_group_delete_deletes_routes_using_it() -> None:
    """Deleting a group deletes its routes; its member nexthops stay."""
    fake = loaded()
    assert run(fake, "delete", GROUP_OBJ) is None
    assert fake.observe() == attrs.evolve(STATE, groups=[], routes=[INLINE])


def test_direct_nexthop_route_goes_with_its_nexthop() -> None:
    """A route whose nhid is a plain nexthop is deleted with that nexthop."""
    fake = loaded()
    direct = Route(table=100, dst=IPv4Network("10.7.0.0/16"), metric=100, nhid=NH3)
    assert run(fake, "create", direct) is None
    assert run(fake, "delete", NEXTHOP3) is None
    assert fake.get("routes", direct.key) is None


def test_link_replace_of_mutable_fields_keeps_dependents() -> None:
    """MTU and MAC change in place: everything on the link stays."""
    fake = loaded()
    new = attrs.evolve(LINK, mtu=1400, mac="02:53:f0:00:00:99")
    assert run(fake, "replace", new) is None
    assert fake.observe() == attrs.evolve(STATE, links=[new, TUNNEL])


def test_link_replace_of_vni_recreates_the_link_without_dependents() -> None:
    """A VNI change is a delete + create (the kernel refuses it in place): dependents are gone."""
    fake = loaded()
    new = attrs.evolve(LINK, vni=200)
    assert run(fake, "replace", new) is None
    assert fake.observe() == DesiredState(
        links=[new, TUNNEL], addresses=[TUNNEL_ADDR], nexthops=[NEXTHOP3], rules=[RULE]
    )


def test_link_down_flushes_neighbors_nexthops_and_single_path_routes() -> None:
    """Kernel on NETDEV_DOWN: neighbors (even permanent), nexthops and single-path routes go; FDB/addresses stay."""
    fake = loaded()
    multipath = Route(
        table=254,
        dst=IPv4Network("100.3.0.0/16"),
        metric=100,
        nexthops=(
            RouteNexthop(via=IPv4Address("240.0.0.2"), dev=VX),
            RouteNexthop(via=IPv4Address("241.0.0.2"), dev=VT),
        ),
    )
    assert run(fake, "create", multipath) is None
    down = attrs.evolve(LINK, up=False)
    assert run(fake, "replace", down) is None
    assert fake.observe() == DesiredState(
        links=[down, TUNNEL],
        addresses=[ADDR, TUNNEL_ADDR],
        fdb=[FDB],
        nexthops=[NEXTHOP3],
        routes=[multipath],
        rules=[RULE],
    )


def test_last_address_delete_flushes_neighbors_and_single_path_routes_but_not_nexthops() -> None:
    """Kernel: removing a device's last address flushes its neighbors and single-path routes through it;
    nexthop objects and FDB entries stay. Removing another address first changes nothing."""
    fake = loaded()
    second = Address(dev=VX, address=IPv4Interface("10.5.0.1/24"))
    assert run(fake, "create", second) is None
    assert run(fake, "delete", second) is None
    assert fake.observe() == STATE
    assert run(fake, "delete", ADDR) is None
    assert fake.observe() == attrs.evolve(STATE, addresses=[TUNNEL_ADDR], neighbors=[], routes=[ROUTE])


# ---- foreign state


def foreign_fake() -> FakeNetlink:
    fake = FakeNetlink()
    fake.add_foreign_address("cni0", "10.1.3.1/24")
    fake.add_foreign_address("eth0", "192.168.1.10/24")
    fake.add_foreign(Nexthop(id=7, via=IPv4Address("192.168.1.1"), dev="eth0"))
    fake.add_foreign(NexthopGroup(id=8, members=(GroupMember(id=7),)))
    fake.add_foreign(Route(table=100, dst=IPv4Network("192.168.50.0/24"), metric=100, nhid=8))
    fake.add_foreign(
        Route(table=100, dst=DST, metric=50, nexthops=(RouteNexthop(via=IPv4Address("192.168.1.1"), dev="eth0"),)),
        protocol=4,
    )
    fake.add_foreign(
        Route(table=200, dst=DST, metric=100, nexthops=(RouteNexthop(via=IPv4Address("192.168.1.1"), dev="eth0"),)),
        protocol=RTPROT_MAGW,
    )
    fake.add_foreign(Rule(priority=32000, table=200))
    fake.add_foreign(Neighbor(dev="eth0", ip=IPv4Address("192.168.1.1"), mac="02:00:00:00:00:aa"))
    return fake


FOREIGN_DUMP = """\
link cni0 (not vxlan) up
link eth0 (not vxlan) up
addr 10.1.3.1/24 dev cni0
addr 192.168.1.10/24 dev eth0
neigh 192.168.1.1 dev eth0 lladdr 02:00:00:00:00:aa nud permanent
nexthop id 7 via 192.168.1.1 dev eth0
nexthop id 8 group 7 type mpath
route 10.2.0.0/16 table 100 nexthop via 192.168.1.1 dev eth0 weight 1 metric 50 proto 4
route 192.168.50.0/24 table 100 nhid 8 metric 100 proto 3
route 10.2.0.0/16 table 200 nexthop via 192.168.1.1 dev eth0 weight 1 metric 100 proto 157
rule 32000: from all lookup 200
"""


def test_dump_lists_everything_sorted() -> None:
    """dump() prints every object, ours and foreign, one sorted line each, kinds in KINDS order."""
    assert foreign_fake().dump() == FOREIGN_DUMP


def test_foreign_objects_are_never_observed() -> None:
    """observe() returns only what we own: another protocol, a table not ours, ids/names/priorities not ours."""
    assert foreign_fake().observe() == DesiredState()


def test_foreign_objects_survive_sync_and_cleanup() -> None:
    """Applying a full state and then removing all of it leaves every foreign object as it was."""
    fake = foreign_fake()
    assert fake.apply(diff(STATE, fake.observe())).failed == ()
    assert fake.observe() == STATE
    assert fake.apply(diff(DesiredState(), fake.observe())).failed == ()
    assert fake.observe() == DesiredState()
    assert fake.dump() == FOREIGN_DUMP


def test_add_foreign_refuses_what_we_own() -> None:
    """add_foreign() is for foreign state only: one of ours is a ValueError naming it."""
    fake = FakeNetlink()
    with pytest.raises(ValueError, match=r"^add_foreign: links vx-submariner is owned by magw \(protocol 3\)$"):
        fake.add_foreign(LINK)
    with pytest.raises(ValueError, match=r"^add_foreign: routes .* is owned by magw \(protocol 157\)$"):
        fake.add_foreign(INLINE, protocol=RTPROT_MAGW)


def test_foreign_route_under_our_key() -> None:
    """The kernel's route key has no protocol: create over a foreign route is EEXIST naming its protocol (the one
    refusal of "create = make it exist"), delete leaves it alone, replace takes it over (NLM_F_REPLACE)."""
    fake = with_link()
    foreign = attrs.evolve(INLINE, nexthops=(RouteNexthop(via=IPv4Address("240.0.0.9"), dev=VX),))
    fake.add_foreign(foreign, protocol=RTPROT_BOOT)
    assert run(fake, "create", INLINE) == (
        "EEXIST: File exists (routes 254 100.2.0.0/16 100 is held by a route of protocol 3)"
    )
    assert run(fake, "delete", INLINE) is None
    assert (fake.get("routes", INLINE.key), fake.route_protocol(INLINE.key)) == (foreign, RTPROT_BOOT)
    assert run(fake, "replace", INLINE) is None
    assert (fake.get("routes", INLINE.key), fake.route_protocol(INLINE.key)) == (INLINE, RTPROT_MAGW)


# ---- normalization, tampering helpers


def test_macs_read_back_in_lower_case() -> None:
    """The kernel prints MACs in lower case; so does observe(), and an upper-case delete still finds the entry."""
    fake = with_link()
    upper = attrs.evolve(FDB, mac="02:53:F0:00:00:02")
    assert run(fake, "create", upper) is None
    assert fake.observe().fdb == (FDB,)
    assert run(fake, "delete", upper) is None
    assert fake.observe().fdb == ()


def test_mpath_group_reads_back_without_resilient_parameters() -> None:
    """A plain group cannot carry buckets/timers: they read back as 0 (so a state setting them never converges)."""
    fake = loaded()
    odd = NexthopGroup(id=GROUP + 1, members=(GroupMember(id=NH1),), buckets=8, idle_timer=3)
    assert run(fake, "create", odd) is None
    assert fake.get("groups", GROUP + 1) == NexthopGroup(id=GROUP + 1, members=(GroupMember(id=NH1),))


def test_put_and_remove_change_state_behind_our_back() -> None:
    """put() replaces whoever owns it (kernel checks apply), remove() deletes with side effects."""
    fake = loaded()
    fake.put(attrs.evolve(NEIGH, mac="02:53:f0:00:00:77"))
    assert fake.observe().neighbors == (attrs.evolve(NEIGH, mac="02:53:f0:00:00:77"),)
    assert fake.remove("groups", GROUP) is True
    assert fake.remove("groups", GROUP) is False
    assert fake.observe().routes == (INLINE,)
    with pytest.raises(KernelError, match=r"^ENODEV: Cannot find device 'nosuch'$"):
        fake.put(Address(dev="nosuch", address=IPv4Interface("10.0.0.1/24")))
    assert fake.remove("rules", 100) is True
    assert fake.observe().rules == ()


def test_copy_is_independent() -> None:
    """A copy changes without changing the original."""
    fake = loaded()
    clone = fake.copy()
    clone.remove("links", VX)
    assert fake.observe() == STATE
    assert clone.observe() != STATE


def test_foreign_link_type() -> None:
    """add_foreign_link() makes a non-VXLAN device that only shows in dump()."""
    fake = FakeNetlink()
    fake.add_foreign_link("br0", up=False)
    assert fake.get("links", "br0") == ForeignLink(name="br0", up=False)
    assert fake.dump() == "link br0 (not vxlan) down\n"


def test_a_non_vxlan_device_under_our_name_is_recreated_as_ours() -> None:
    """A device named like ours that is not a VXLAN: a create of our link deletes it (with what hangs on it)
    and makes ours, as the netlink driver's LinkIO.ensure does."""
    fake = FakeNetlink()
    fake.put(ForeignLink(name=VX))
    fake.put(Address(dev=VX, address=IPv4Interface("192.0.2.1/24")))
    assert run(fake, "create", LINK) is None
    assert fake.dump() == (
        "link vx-submariner type vxlan id 100 dstport 4800 local 172.18.0.1 nolearning mtu 1450"
        " address 02:53:f0:00:00:01 up\n"
    )


def test_what_the_fake_does_not_model_is_listed_in_its_doc() -> None:
    """The deliberate gaps of FakeNetlink are this list, and the module's docstring shows every entry."""
    assert NOT_MODELLED == (
        "IPv6: addresses, neighbors, routes and nexthops are IPv4 only",
        "route types other than unicast and unreachable (the kernel driver observes them as unicast without a path)",
        "neighbor states other than nud permanent, dynamic FDB entries, FDB entries with several destinations",
        "a non-VXLAN device under one of our link names is not observed (the kernel driver observes it with vni 0)",
        "several rules at one of our priorities, or one with selectors (the kernel driver observes table 0)",
        "the kernel's extack wording: the errno names match, the message texts are the fake's own",
        "route metrics, tos and flags beyond the key; nexthop_compat_mode's expansion of nhid routes",
        "a link MAC change flushing neighbors (the netlink driver puts the permanent ones back, so none is lost)",
    )
    doc = magw.drivers.netlink.fake.namespace.__doc__ or ""
    assert [item for item in NOT_MODELLED if f"\n- {item}\n" not in doc] == []
