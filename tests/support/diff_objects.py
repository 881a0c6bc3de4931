"""Small desired-state objects for the diff tests: one VXLAN link and its peers, two nexthops in a resilient
group, a route through it, and ``small_state`` holding one of every kind (each a keyword away from a variant)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any

import attrs

from magw.desired.state import (
    Address,
    DesiredState,
    Fdb,
    GroupMember,
    Link,
    Neighbor,
    Nexthop,
    NexthopGroup,
    Route,
    Rule,
)
from magw.reconcile.changeset import ChangeSet

VX = "vx-submariner"
NH1, NH2, NH3 = 0x60000002, 0x60000003, 0x60000004
GROUP = 0x63000001
DST = IPv4Network("10.2.0.0/16")


def link(**changes: Any) -> Link:
    base = Link(name=VX, vni=100, port=4800, mtu=1450, mac="02:53:f0:00:00:01", local=IPv4Address("172.18.0.1"))
    return attrs.evolve(base, **changes)


def nexthop(nh_id: int, via: str) -> Nexthop:
    return Nexthop(id=nh_id, via=IPv4Address(via), dev=VX)


def group(*members: int, **changes: Any) -> NexthopGroup:
    base = NexthopGroup(
        id=GROUP, members=tuple(GroupMember(id=m) for m in members), type="resilient", buckets=32, idle_timer=10
    )
    return attrs.evolve(base, **changes)


def route(dst: IPv4Network = DST, **changes: Any) -> Route:
    return attrs.evolve(Route(table=100, dst=dst, metric=100, nhid=GROUP), **changes)


def small_state(**changes: Any) -> DesiredState:
    """One of every kind, consistent: a link, its address, a peer, two nexthops, a group, a route, a rule."""
    base = DesiredState(
        links=[link()],
        addresses=[Address(dev=VX, address=IPv4Interface("240.0.0.1/8"))],
        neighbors=[Neighbor(dev=VX, ip=IPv4Address("240.0.0.2"), mac="02:53:f0:00:00:02")],
        fdb=[Fdb(dev=VX, mac="02:53:f0:00:00:02", dst=IPv4Address("172.18.0.2"))],
        nexthops=[nexthop(NH1, "240.0.0.2"), nexthop(NH2, "240.0.0.3")],
        groups=[group(NH1, NH2)],
        routes=[route()],
        rules=[Rule(priority=100, table=100)],
    )
    return attrs.evolve(base, **changes)


def shape(changes: ChangeSet) -> list[tuple[str, str]]:
    """(verb, kind) of each operation, in order."""
    return [(op.verb, op.kind) for op in changes.ops]
