"""``FakeNetlink``: the netlink state of ONE network namespace, in memory, failing like the kernel.

It holds everything of a namespace that magw cares about, ours and foreign: links,
addresses, neighbors, FDB entries, nexthop objects and groups (one id space, as in
the kernel), routes (with their protocol) and rules. ``observe()`` returns only what
we own (``magw.drivers.netlink.constants``); ``apply()`` carries out a ChangeSet's
ops in order, each on its own, and touches only what we own (an op on anything else
fails with EPERM: our guard, not the kernel's).

Driver semantics (the reconciler's contract, on top of the kernel): create of an
identical object succeeds, create over different content is EEXIST "File exists",
replace of a missing object creates it (NLM_F_CREATE|NLM_F_REPLACE), delete of a
missing object succeeds. The kernel's refusals, with errno and extack message, are in
``magw.drivers.fake_netlink_checks``: ENODEV (missing device), ENETDOWN "Nexthop
device is not up", ENETUNREACH "Nexthop has invalid gateway" (``via`` not on-link),
EINVAL "Nexthop id does not exist" (route nhid), EINVAL "Invalid nexthop id" (group
member), EINVAL on a group type or bucket-count change, EINVAL "Invalid prefsrc
address", EEXIST for a second VXLAN link with the same VNI and port.

Side effects, as kernel 6.18 does them (checked with ``ip`` in a throwaway namespace):

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
- a link replace of mtu/mac/up keeps every dependent; a change of vni/port (which the
  kernel refuses in place: EOPNOTSUPP "Cannot change VNI") or of local/learning is a
  delete plus create, as the netlink driver does it, so dependents go;
- a route's kernel key is (table, dst, tos, metric) without the protocol: create over
  a foreign route is EEXIST, replace takes the foreign route over, and a delete (which
  names our protocol) leaves a foreign route alone.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from ipaddress import IPv4Interface
from typing import Protocol, TypeVar

import attrs
import structlog

from magw.desired.state import (
    Address,
    DesiredState,
    Fdb,
    Link,
    Neighbor,
    NetObject,
    Nexthop,
    NexthopGroup,
    Route,
    Rule,
)
from magw.drivers.fake_netlink_checks import (
    AnyLink,
    AnyNexthop,
    ForeignLink,
    KernelError,
    check_group,
    check_id_replace,
    check_link,
    check_lladdr,
    check_nexthop,
    check_route,
    find_dev,
    kind_of,
    normalize,
)
from magw.drivers.fake_netlink_text import dump_lines
from magw.drivers.netlink.constants import (
    OWNED_LINKS,
    OWNED_RULE_PRIORITIES,
    OWNED_TABLES,
    RTPROT_MAGW,
    owns_nexthop,
)
from magw.reconcile.changeset import ChangeSet, NftChange, Op, key_text
from magw.reconcile.driver import ApplyResult, Failure

__all__ = ["RTPROT_BOOT", "FakeNetlink", "ForeignLink", "KernelError", "is_owned"]

log = structlog.get_logger(__name__)

# The protocol `ip route add` gives a route when none is named ("proto boot").
RTPROT_BOOT = 3

# Link fields changed only by delete + create (the netlink driver's choice; see the module doc).
_RECREATE_FIELDS = ("vni", "port", "local", "learning")


class _OnDev(Protocol):
    @property
    def dev(self) -> str: ...


_T = TypeVar("_T", bound=_OnDev)


def is_owned(obj: NetObject | ForeignLink, protocol: int = RTPROT_MAGW) -> bool:
    """Whether magw owns ``obj``; a route also by its ``protocol``."""
    if isinstance(obj, Link | ForeignLink):
        return obj.name in OWNED_LINKS
    if isinstance(obj, Address | Neighbor | Fdb):
        return obj.dev in OWNED_LINKS
    if isinstance(obj, Nexthop | NexthopGroup):
        return owns_nexthop(obj.id)
    if isinstance(obj, Route):
        return protocol == RTPROT_MAGW and obj.table in OWNED_TABLES
    return obj.priority in OWNED_RULE_PRIORITIES


def _drop_on(store: dict[Hashable, _T], dev: str) -> None:
    for key in [k for k, obj in store.items() if obj.dev == dev]:
        del store[key]


@attrs.define
class FakeNetlink:
    """Kernel-like netlink state of one namespace.

    ``check_prefsrc``: like the kernel, refuse a unicast route whose ``src`` is not an
    address of the namespace (EINVAL "Invalid prefsrc address"). Our routes use the
    node's CNI IP, so give it first: ``fake.add_foreign_address("cni0", "10.1.3.1/24")``.
    """

    check_prefsrc: bool = True
    _links: dict[str, AnyLink] = attrs.field(factory=dict, init=False)
    _addresses: dict[Hashable, Address] = attrs.field(factory=dict, init=False)
    _neighbors: dict[Hashable, Neighbor] = attrs.field(factory=dict, init=False)
    _fdb: dict[Hashable, Fdb] = attrs.field(factory=dict, init=False)
    _ids: dict[Hashable, AnyNexthop] = attrs.field(factory=dict, init=False)
    _routes: dict[Hashable, tuple[Route, int]] = attrs.field(factory=dict, init=False)
    _rules: dict[Hashable, Rule] = attrs.field(factory=dict, init=False)  # (priority, table): several per priority

    # ---- the Driver protocol

    def observe(self) -> DesiredState:
        """What we own, as the kernel reports it back (``nft`` is the nft driver's: always None)."""
        return DesiredState(
            links=[lk for lk in self._links.values() if isinstance(lk, Link) and is_owned(lk)],
            addresses=[a for a in self._addresses.values() if is_owned(a)],
            neighbors=[n for n in self._neighbors.values() if is_owned(n)],
            fdb=[f for f in self._fdb.values() if is_owned(f)],
            nexthops=[n for n in self._ids.values() if isinstance(n, Nexthop) and is_owned(n)],
            groups=[g for g in self._ids.values() if isinstance(g, NexthopGroup) and is_owned(g)],
            routes=[r for r, proto in self._routes.values() if is_owned(r, proto)],
            rules=[r for r in self._rules.values() if is_owned(r)],
        )

    def apply(self, changes: ChangeSet) -> ApplyResult:
        """Carry out ``changes.ops`` in order (``changes.nft`` is not ours); a failed op does not stop the rest."""
        applied: list[Op | NftChange] = []
        failed: list[Failure] = []
        for op in changes.ops:
            try:
                self._apply_op(op)
            except KernelError as err:
                failed.append(Failure(op=op, error=str(err)))
                log.debug("fake_netlink.op_failed", op=op.describe(), error=str(err))
            else:
                applied.append(op)
        log.debug("fake_netlink.apply_done", ops=len(changes.ops), applied=len(applied), failed=len(failed))
        return ApplyResult(applied=tuple(applied), failed=tuple(failed))

    def dump(self) -> str:
        """Sorted text of everything in the namespace, ours and foreign, one object per line."""
        return dump_lines(
            links=self._links.values(),
            addresses=self._addresses.values(),
            neighbors=self._neighbors.values(),
            fdb=self._fdb.values(),
            ids=self._ids.values(),
            routes=self._routes.values(),
            rules=self._rules.values(),
        )

    # ---- state made by others, or changed behind our back

    def add_foreign(self, obj: NetObject | ForeignLink, *, protocol: int = RTPROT_BOOT) -> None:
        """Add an object magw does not own (other protocol, id, name or priority); ValueError if it is ours."""
        if is_owned(obj, protocol):
            raise ValueError(f"add_foreign: {kind_of(obj)} {obj.key} is owned by magw (protocol {protocol})")
        self.put(obj, protocol=protocol)

    def add_foreign_link(self, name: str, *, up: bool = True) -> None:
        """A device magw does not manage (``eth0``, ``cni0``, a bridge)."""
        self.add_foreign(ForeignLink(name=name, up=up))

    def add_foreign_address(self, dev: str, address: IPv4Interface | str) -> None:
        """An address on a foreign device, creating the device if it is missing (e.g. the node's CNI IP)."""
        if dev not in self._links:
            self.add_foreign_link(dev)
        self.add_foreign(Address(dev=dev, address=IPv4Interface(address)))

    def put(self, obj: NetObject | ForeignLink, *, protocol: int = RTPROT_MAGW) -> None:
        """Create or replace ``obj`` whoever owns it, as ``ip ... replace`` would; KernelError when refused."""
        self._replace(normalize(obj), protocol)

    def remove(self, kind: str, key: Hashable) -> bool:
        """Delete ``kind``/``key`` whoever owns it, with the kernel's side effects; False if it was missing.

        Rules: ``key`` is a priority (every rule at it) or a (priority, table) pair.
        """
        if kind == "rules":
            doomed = [k for k, r in self._rules.items() if key in (r.priority, k)]
            for k in doomed:
                del self._rules[k]
            return bool(doomed)
        if self._lookup(kind, key) is None:
            return False
        self._remove(kind, key)
        return True

    def get(self, kind: str, key: Hashable) -> NetObject | ForeignLink | None:
        """The object under ``key`` whoever owns it (nexthops and groups share ids; rules: a priority)."""
        if kind == "rules":
            return next((r for k, r in sorted(self._rules.items()) if key in (r.priority, k)), None)
        found = self._lookup(kind, key)
        return found[0] if isinstance(found, tuple) else found

    def route_protocol(self, key: Hashable) -> int | None:
        """The protocol of the route under ``key`` (table, dst, metric), or None."""
        entry = self._routes.get(key)
        return None if entry is None else entry[1]

    def copy(self) -> FakeNetlink:
        """An independent copy (objects are frozen, so copying the tables is enough)."""
        new = FakeNetlink(check_prefsrc=self.check_prefsrc)
        new._links = dict(self._links)
        new._addresses = dict(self._addresses)
        new._neighbors = dict(self._neighbors)
        new._fdb = dict(self._fdb)
        new._ids = dict(self._ids)
        new._routes = dict(self._routes)
        new._rules = dict(self._rules)
        return new

    # ---- one op

    def _apply_op(self, op: Op) -> None:
        obj = normalize(op.obj)
        if kind_of(obj) != op.kind:
            raise KernelError("EINVAL", f"op kind {op.kind} does not match a {type(obj).__name__}")
        if not is_owned(obj):
            raise KernelError("EPERM", f"{op.kind} {obj.key} is not owned by magw; refusing to touch it")
        assert not isinstance(obj, ForeignLink)  # never owned, refused just above
        if op.verb == "create":
            self._create(obj)
        elif op.verb == "replace":
            self._replace(obj, RTPROT_MAGW)
        else:
            self._delete(obj)

    def _create(self, obj: NetObject) -> None:
        if isinstance(obj, Rule):
            same_priority = [r for r in self._rules.values() if r.priority == obj.priority]
            if same_priority and obj not in same_priority:
                raise KernelError("EEXIST", f"File exists (rule {obj.priority} looks up {same_priority[0].table})")
            self._rules[(obj.priority, obj.table)] = obj
            return
        existing = self._lookup(kind_of(obj), obj.key)
        if existing is None:
            self._install(obj, RTPROT_MAGW)
        elif existing != ((obj, RTPROT_MAGW) if isinstance(obj, Route) else obj):
            held = kind_of(existing[0] if isinstance(existing, tuple) else existing)
            raise KernelError("EEXIST", f"File exists ({held} {key_text(obj.key)} holds other content)")

    def _replace(self, obj: NetObject | ForeignLink, protocol: int) -> None:
        if isinstance(obj, Rule):
            if is_owned(obj):  # one rule per priority of ours; foreign priorities may hold several
                self.remove("rules", obj.priority)
            self._rules[(obj.priority, obj.table)] = obj
            return
        existing = self._lookup(kind_of(obj), obj.key)
        if isinstance(existing, Link | ForeignLink) and isinstance(obj, Link | ForeignLink):
            self._replace_link(existing, obj)
            return
        if isinstance(existing, Nexthop | NexthopGroup) and isinstance(obj, Nexthop | NexthopGroup):
            check_id_replace(existing, obj)
        self._install(obj, protocol)  # a route's NLM_F_REPLACE takes over a foreign route under the same key

    def _replace_link(self, old: AnyLink, new: AnyLink) -> None:
        if type(old) is not type(new):
            raise KernelError("EOPNOTSUPP", f"link {new.name} cannot change its type")
        if isinstance(old, Link) and isinstance(new, Link) and _recreate(old, new):
            check_link(new, self._links.values())
            self._remove_link(old.name)
        self._install(new, RTPROT_MAGW)
        if old.up and not new.up and new.name in self._links:
            self._link_down(new.name)

    def _delete(self, obj: NetObject) -> None:
        if isinstance(obj, Rule):
            self.remove("rules", obj.priority)
            return
        existing = self._lookup(kind_of(obj), obj.key)
        if existing is None:
            return
        if isinstance(existing, tuple) and existing[1] != RTPROT_MAGW:
            return  # RTM_DELROUTE names our protocol: ESRCH for a foreign route, i.e. ours is gone
        self._remove(kind_of(obj), obj.key)

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
            find_dev(obj.dev, self._links)
            check_lladdr(obj.mac)
            self._fdb[obj.key] = obj
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
            self._rules[(obj.priority, obj.table)] = obj

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


def _recreate(old: Link, new: Link) -> bool:
    return any(getattr(old, f) != getattr(new, f) for f in _RECREATE_FIELDS)
