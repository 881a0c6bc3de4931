"""Shared objects and helpers for the FakeNetlink tests: one consistent state of every kind."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network

from magw.desired.state import (
    Address,
    DesiredState,
    Fdb,
    GroupMember,
    Link,
    Neighbor,
    NetObject,
    Nexthop,
    NexthopGroup,
    Route,
    RouteNexthop,
    Rule,
)
from magw.drivers.netlink.fake.checks import kind_of
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.reconcile.changeset import ChangeSet, Op, Verb
from magw.reconcile.diff import diff

VX, VT = "vx-submariner", "vxlan-tunnel"
NH1, NH2, NH3 = 0x60000002, 0x60000003, 0x61000002
GROUP = 0x63000001
DST = IPv4Network("10.2.0.0/16")
CNI_IP = IPv4Address("10.1.3.1")

LINK = Link(name=VX, vni=100, port=4800, mtu=1450, mac="02:53:f0:00:00:01", local=IPv4Address("172.18.0.1"))
TUNNEL = Link(name=VT, vni=1000, port=4500, mtu=1450, mac="02:53:f1:00:00:01")
ADDR = Address(dev=VX, address=IPv4Interface("240.0.0.1/8"))
TUNNEL_ADDR = Address(dev=VT, address=IPv4Interface("241.0.0.1/8"))
NEIGH = Neighbor(dev=VX, ip=IPv4Address("240.0.0.2"), mac="02:53:f0:00:00:02")
FDB = Fdb(dev=VX, mac="02:53:f0:00:00:02", dst=IPv4Address("172.18.0.2"))
NEXTHOP1 = Nexthop(id=NH1, via=IPv4Address("240.0.0.2"), dev=VX)
NEXTHOP2 = Nexthop(id=NH2, via=IPv4Address("240.0.0.3"), dev=VX)
NEXTHOP3 = Nexthop(id=NH3, via=IPv4Address("241.0.0.2"), dev=VT)
GROUP_OBJ = NexthopGroup(
    id=GROUP, members=(GroupMember(id=NH1), GroupMember(id=NH2)), type="resilient", buckets=32, idle_timer=10
)
ROUTE = Route(table=100, dst=DST, metric=100, src=CNI_IP, nhid=GROUP)
INLINE = Route(
    table=254,
    dst=IPv4Network("100.2.0.0/16"),
    metric=100,
    nexthops=(RouteNexthop(via=IPv4Address("240.0.0.2"), dev=VX),),
)
RULE = Rule(priority=100, table=100)

STATE = DesiredState(
    links=[LINK, TUNNEL],
    addresses=[ADDR, TUNNEL_ADDR],
    neighbors=[NEIGH],
    fdb=[FDB],
    nexthops=[NEXTHOP1, NEXTHOP2, NEXTHOP3],
    groups=[GROUP_OBJ],
    routes=[ROUTE, INLINE],
    rules=[RULE],
)


def loaded() -> FakeNetlink:
    """A fake holding STATE (and the CNI address our routes use as src)."""
    fake = FakeNetlink()
    fake.add_foreign_address("cni0", "10.1.3.1/24")
    result = fake.apply(diff(STATE, fake.observe()))
    assert result.failed == ()
    assert fake.observe() == STATE
    return fake


def run(fake: FakeNetlink, verb: Verb, obj: NetObject) -> str | None:
    """Apply one op; the failure text, or None on success."""
    result = fake.apply(ChangeSet(ops=(Op(verb=verb, kind=kind_of(obj), obj=obj),)))
    return result.failed[0].error if result.failed else None


def with_link() -> FakeNetlink:
    """A fake holding only LINK, its address, and the CNI address."""
    fake = FakeNetlink()
    fake.add_foreign_address("cni0", "10.1.3.1/24")
    assert fake.apply(diff(DesiredState(links=[LINK], addresses=[ADDR]), fake.observe())).ok
    return fake
