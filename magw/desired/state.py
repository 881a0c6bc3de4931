"""The objects of a node's desired (or observed) state, as frozen keyed values.

Each object has a ``key`` that names it the way the kernel does (a route is
``(table, dst, metric)``, a nexthop is its id, ...). Two objects with the same key
and different fields mean "replace". The same types describe what a driver
observes, so the diff engine compares like with like.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any, Literal, Protocol

import attrs

from magw.desired.cable.values import WgDevice
from magw.desired.nft.values import NftTable
from magw.model.netfast import net_key

MAIN_TABLE = 254


@attrs.frozen(kw_only=True)
class Link:
    """A VXLAN device we own.

    ``external`` is collect-metadata mode (the VNI and remote come from each route's ``encap``; ``vni`` is 0)
    and ``gpe`` VXLAN-GPE (no inner Ethernet header, no MAC: ``mac`` is ""); the egress gateway's
    ``magw-egress`` is both (docs/egress-datapath.md).
    """

    name: str
    vni: int
    port: int
    mtu: int
    mac: str
    local: IPv4Address | None = None
    learning: bool = False
    up: bool = True
    external: bool = False
    gpe: bool = False

    @property
    def key(self) -> str:
        return self.name


@attrs.frozen(kw_only=True)
class Address:
    dev: str
    address: IPv4Interface

    @property
    def key(self) -> tuple[str, IPv4Interface]:
        return (self.dev, self.address)


@attrs.frozen(kw_only=True)
class Neighbor:
    """A static (``nud permanent``) neighbor entry: VTEP IP -> MAC."""

    dev: str
    ip: IPv4Address
    mac: str

    @property
    def key(self) -> tuple[str, IPv4Address]:
        return (self.dev, self.ip)


@attrs.frozen(kw_only=True)
class Fdb:
    """A unicast VXLAN FDB entry: MAC -> underlay IP and UDP port (``self permanent``).

    ``port`` is the entry's own destination port (``bridge fdb ... dst IP port P``, NDA_PORT), for a remote
    reached at a port of its own (a gateway behind a load balancer, docs/load-balancer.md); None sends to the
    device's destination port. The kernel reports a port only when it is neither 0 nor the device's own
    port, so an entry written with either reads back with ``port`` None: a plan says None for those, or it
    never converges.
    """

    dev: str
    mac: str
    dst: IPv4Address
    port: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.dev, self.mac)


@attrs.frozen(kw_only=True)
class Nexthop:
    """A nexthop object: ``ip nexthop add id ID via VIA dev DEV``."""

    id: int
    via: IPv4Address
    dev: str

    @property
    def key(self) -> int:
        return self.id


GroupType = Literal["mpath", "resilient"]


@attrs.frozen(kw_only=True)
class GroupMember:
    id: int
    weight: int = 1


@attrs.frozen(kw_only=True)
class NexthopGroup:
    """A nexthop group. ``buckets``/timers are only meaningful for ``resilient``."""

    id: int
    members: tuple[GroupMember, ...]
    type: GroupType = "mpath"
    buckets: int = 0
    idle_timer: int = 0
    unbalanced_timer: int = 0

    @property
    def key(self) -> int:
        return self.id


@attrs.frozen(kw_only=True)
class RouteNexthop:
    """One resolved path of a route."""

    via: IPv4Address
    dev: str
    weight: int = 1


RouteType = Literal["unicast", "unreachable"]


@attrs.frozen(kw_only=True)
class RouteEncap:
    """A lightweight-tunnel encapsulation of a route, ``encap ip id ID dst DST`` (for an ``external`` device)."""

    id: int
    dst: IPv4Address


@attrs.frozen(kw_only=True)
class Route:
    """A route we own.

    A unicast route either names a nexthop object/group (``nhid``) or carries its
    paths inline (``nexthops``, one or several: classic multipath). An unreachable
    route has neither.
    """

    table: int
    dst: IPv4Network
    metric: int
    src: IPv4Address | None = None
    type: RouteType = "unicast"
    nhid: int | None = None
    nexthops: tuple[RouteNexthop, ...] = ()
    encap: RouteEncap | None = None

    @property
    def key(self) -> tuple[int, IPv4Network, int]:
        return (self.table, self.dst, self.metric)


@attrs.frozen(kw_only=True)
class Rule:
    """An ip rule we own, identified by its priority: ``from all lookup TABLE``, or with ``iif``
    ``from all iif DEV lookup TABLE`` (OVN's table 149 serves only what arrives from remote clusters), or with
    ``fwmark``/``fwmask`` ``from all fwmark MARK/MASK lookup TABLE`` (the egress gateway's steering)."""

    priority: int
    table: int
    iif: str | None = None
    fwmark: int | None = None
    fwmask: int | None = None

    @property
    def key(self) -> int:
        return self.priority


NetObject = Link | Address | Neighbor | Fdb | Nexthop | NexthopGroup | Route | Rule


class Keyed(Protocol):
    """Anything with a kernel-style key. Keys of one kind are of one type and compare with each other."""

    @property
    def key(self) -> Any: ...


# Kinds in dependency order: each may refer only to kinds before it.
KINDS: tuple[str, ...] = ("links", "addresses", "neighbors", "fdb", "nexthops", "groups", "routes", "rules")


def int_key(obj: Any) -> Any:
    """``obj.key`` with its addresses as ints: a route's ``(table, net_key(dst), metric)``, a neighbor's ``(dev, ip
    as int)``, any other object's own key. Equal exactly when ``obj.key`` is equal, and in the same order.

    Shaped for speed (docs/performance.md): ``IPv4Network`` and ``IPv4Address`` compare and hash in Python code, and a
    tuple does not cache its hash. Sorting 100k routes (``sorted_objects``) and the diff's dict lookups on their
    keys (``magw.reconcile.diff``) ran them for every comparison and lookup; a neighbor's key does the same for
    a gateway's 5,000 neighbors (benchmarks/node_scale.py). Keys of one kind only ever meet each other.
    """
    if isinstance(obj, Route):
        return (obj.table, net_key(obj.dst), obj.metric)
    if isinstance(obj, Neighbor):
        return (obj.dev, int(obj.ip))
    return obj.key


class SortedObjects(tuple[Any, ...]):
    """A tuple of objects of one kind already in ``int_key`` order (a tuple never changes, so it stays so).

    ``DesiredState`` takes it as it is instead of sorting it again: a planner piece reused from the last plan
    (``magw.desired.node.memo``) keeps its identity into the new state, and the diff skips a kind whose tuple is
    the very one the kernel holds (docs/performance.md: sorting 100k routes was 0.2 s of every plan).
    """

    __slots__ = ()


def sorted_objects(objs: Iterable[Any]) -> SortedObjects:
    """``objs`` sorted by key, marked as such (see ``SortedObjects``)."""
    if type(objs) is SortedObjects:
        return objs
    return SortedObjects(sorted(objs, key=int_key))


def _sorted(objs: Iterable[Any]) -> tuple[Any, ...]:
    # Typed Any on purpose: the attrs mypy plugin cannot solve a generic converter per field,
    # and the field annotations below already say what each tuple holds.
    return sorted_objects(objs)


def _tables_by_key(tables: Iterable[NftTable]) -> tuple[NftTable, ...]:
    return tuple(sorted(tables, key=lambda t: (t.family, t.name)))


@attrs.frozen(kw_only=True)
class DesiredState:
    """The complete state of one node, sorted by key in every kind.

    ``nft`` is None when the node needs no nftables table of ours.
    """

    links: tuple[Link, ...] = attrs.field(default=(), converter=_sorted)
    addresses: tuple[Address, ...] = attrs.field(default=(), converter=_sorted)
    neighbors: tuple[Neighbor, ...] = attrs.field(default=(), converter=_sorted)
    fdb: tuple[Fdb, ...] = attrs.field(default=(), converter=_sorted)
    nexthops: tuple[Nexthop, ...] = attrs.field(default=(), converter=_sorted)
    groups: tuple[NexthopGroup, ...] = attrs.field(default=(), converter=_sorted)
    routes: tuple[Route, ...] = attrs.field(default=(), converter=_sorted)
    rules: tuple[Rule, ...] = attrs.field(default=(), converter=_sorted)
    nft: NftTable | None = None
    # Further tables of ours beside ``nft`` (the egress gateway's ``ip magw-egress``), sorted by key. A table
    # of its own keeps its chain and set names apart from ``ip magw``'s; the drivers own every table listed.
    extra_nft: tuple[NftTable, ...] = attrs.field(default=(), converter=_tables_by_key)
    # A gateway's WireGuard device with ``cable: wireguard`` (magw.desired.cable). Not one of ``KINDS``: the route
    # agent's cable driver keeps it (magw.daemons.route_agent.cable), and observed states leave it None.
    cable: WgDevice | None = None

    def nft_tables(self) -> tuple[NftTable, ...]:
        """Every nft table of this state: ``nft`` first, then ``extra_nft``."""
        return (*(() if self.nft is None else (self.nft,)), *self.extra_nft)

    def of_kind(self, kind: str) -> tuple[NetObject, ...]:
        objs: tuple[NetObject, ...] = getattr(self, kind)
        return objs
