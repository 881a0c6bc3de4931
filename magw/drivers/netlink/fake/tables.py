"""The object tables of ``FakeNetlink``: install with the kernel's checks, remove with its side effects.

``NetlinkTables`` knows nothing of ownership or of the driver's verbs (that is
``magw.drivers.netlink.fake.namespace``). It holds every object of one namespace, ours and
foreign, and behaves as kernel 6.18 does (checked with ``ip`` in a throwaway
namespace):

- deleting a link deletes its addresses, neighbors, FDB entries, the nexthops on it
  (with their own side effects) and every route with an inline path through it;
- deleting a nexthop removes it from every group, deletes a group left empty, and
  deletes the routes using the nexthop or that group; deleting a group deletes the
  routes using it;
- setting a link down flushes its neighbors (permanent ones too), its nexthops and
  the single-path inline routes through it; FDB entries and addresses stay, a
  multipath route stays (its path is marked dead);
- deleting a link's last address flushes its neighbors (permanent ones too) and the
  single-path inline routes through it; nexthop objects and FDB entries stay;
- an FDB entry whose port is 0 or the VXLAN device's own port reads back with port None
  (the kernel reports NDA_PORT only otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol, TypeVar

import attrs

from magw.desired.state import Address, Fdb, Link, Neighbor, NetObject, Nexthop, NexthopGroup, Route, Rule
from magw.drivers.netlink.fake.checks import (
    AnyLink,
    AnyNexthop,
    ForeignLink,
    check_fdb_mac,
    check_fdb_port,
    check_group,
    check_link,
    check_lladdr,
    check_nexthop,
    check_route,
    fdb_as_reported,
    find_dev,
)


class _OnDev(Protocol):
    @property
    def dev(self) -> str: ...


_T = TypeVar("_T", bound=_OnDev)


def _drop_on(store: dict[Hashable, _T], dev: str) -> None:
    for key in [k for k, obj in store.items() if obj.dev == dev]:
        del store[key]


@attrs.define
class NetlinkTables:
    """Every object of one namespace, ours and foreign. ``check_prefsrc``: see ``FakeNetlink``."""

    check_prefsrc: bool = True
    _links: dict[str, AnyLink] = attrs.field(factory=dict, init=False)
    _addresses: dict[Hashable, Address] = attrs.field(factory=dict, init=False)
    _neighbors: dict[Hashable, Neighbor] = attrs.field(factory=dict, init=False)
    _fdb: dict[Hashable, Fdb] = attrs.field(factory=dict, init=False)
    _ids: dict[Hashable, AnyNexthop] = attrs.field(factory=dict, init=False)
    _routes: dict[Hashable, tuple[Route, int]] = attrs.field(factory=dict, init=False)
    _rules: dict[Hashable, Rule] = attrs.field(factory=dict, init=False)  # (priority, table, iif): several per priority

    def _copy_tables_to(self, new: NetlinkTables) -> None:
        """Fill ``new`` with copies of these tables (objects are frozen, so copying the dicts is enough)."""
        new._links = dict(self._links)
        new._addresses = dict(self._addresses)
        new._neighbors = dict(self._neighbors)
        new._fdb = dict(self._fdb)
        new._ids = dict(self._ids)
        new._routes = dict(self._routes)
        new._rules = dict(self._rules)

    # ---- installing one object, after the kernel's checks

    def _install(self, obj: NetObject | ForeignLink, protocol: int) -> None:
        if isinstance(obj, Link):
            check_link(obj, self._links.values())
            self._links[obj.name] = obj
        elif isinstance(obj, ForeignLink):
            self._links[obj.name] = obj
        elif isinstance(obj, Address):
            find_dev(obj.dev, self._links)
            self._addresses[obj.key] = obj
        elif isinstance(obj, Neighbor):
            find_dev(obj.dev, self._links)
            check_lladdr(obj.mac)
            self._neighbors[obj.key] = obj
        elif isinstance(obj, Fdb):
            dev = find_dev(obj.dev, self._links)
            check_fdb_port(obj)  # before the MAC: the netlink driver refuses a bad port without sending it
            check_fdb_mac(obj)
            self._fdb[obj.key] = fdb_as_reported(obj, dev)
        elif isinstance(obj, Nexthop):
            check_nexthop(obj, self._links, self._addresses.values())
            self._ids[obj.id] = obj
        elif isinstance(obj, NexthopGroup):
            check_group(obj, self._ids_by_int())
            self._ids[obj.id] = obj
        elif isinstance(obj, Route):
            local = {a.address.ip for a in self._addresses.values()} if self.check_prefsrc else None
            check_route(obj, self._links, self._addresses.values(), self._ids_by_int(), local)
            self._routes[obj.key] = (obj, protocol)
        else:
            self._rules[(obj.priority, obj.table, obj.iif or "")] = obj

    def _ids_by_int(self) -> dict[int, AnyNexthop]:
        return {n.id: n for n in self._ids.values()}

    def _lookup(self, kind: str, key: Hashable) -> AnyLink | NetObject | tuple[Route, int] | None:
        if kind == "links":
            return self._links.get(key) if isinstance(key, str) else None
        if kind == "addresses":
            return self._addresses.get(key)
        if kind == "neighbors":
            return self._neighbors.get(key)
        if kind == "fdb":
            return self._fdb.get(key)
        if kind in ("nexthops", "groups"):
            return self._ids.get(key)  # one id space, as in the kernel
        if kind == "routes":
            return self._routes.get(key)
        raise ValueError(f"unknown kind {kind!r}")

    # ---- removal, with the kernel's side effects

    def _remove(self, kind: str, key: Hashable) -> None:
        if kind == "links":
            self._remove_link(str(key))
        elif kind == "addresses":
            self._remove_address(self._addresses[key])
        elif kind == "neighbors":
            del self._neighbors[key]
        elif kind == "fdb":
            del self._fdb[key]
        elif kind in ("nexthops", "groups"):
            self._remove_id(key)
        else:
            del self._routes[key]

    def _remove_link(self, name: str) -> None:
        self._drop_routes(lambda r: any(p.dev == name for p in r.nexthops))
        for nh in [n for n in self._ids.values() if isinstance(n, Nexthop) and n.dev == name]:
            self._remove_id(nh.id)
        _drop_on(self._addresses, name)
        _drop_on(self._neighbors, name)
        _drop_on(self._fdb, name)
        del self._links[name]

    def _link_down(self, dev: str) -> None:
        _drop_on(self._neighbors, dev)
        for nh in [n for n in self._ids.values() if isinstance(n, Nexthop) and n.dev == dev]:
            self._remove_id(nh.id)
        self._drop_routes(lambda r: len(r.nexthops) == 1 and r.nexthops[0].dev == dev)

    def _remove_address(self, addr: Address) -> None:
        del self._addresses[addr.key]
        if not any(a.dev == addr.dev for a in self._addresses.values()):
            # Kernel 6.18: the last IPv4 address gone, fib_disable_ip() flushes routes through the device and
            # arp_ifdown() its neighbors, permanent ones included.
            _drop_on(self._neighbors, addr.dev)
            self._drop_routes(lambda r: len(r.nexthops) == 1 and r.nexthops[0].dev == addr.dev)

    def _remove_id(self, nh_id: Hashable) -> None:
        removed = self._ids.pop(nh_id)
        if isinstance(removed, Nexthop):
            for group in [g for g in self._ids.values() if isinstance(g, NexthopGroup)]:
                members = tuple(m for m in group.members if m.id != removed.id)
                if not members:
                    self._remove_id(group.id)
                elif members != group.members:
                    self._ids[group.id] = attrs.evolve(group, members=members)
        self._drop_routes(lambda r: r.nhid == removed.id)

    def _drop_routes(self, doomed: Callable[[Route], bool]) -> None:
        for key in [k for k, (route, _) in self._routes.items() if doomed(route)]:
            del self._routes[key]
