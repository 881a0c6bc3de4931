"""``FakeNetlink``: the netlink state of ONE network namespace, in memory, failing like the kernel.

It holds everything of a namespace that magw cares about, ours and foreign: links,
addresses, neighbors, FDB entries, nexthop objects and groups (one id space, as in
the kernel), routes (with their protocol) and rules. ``observe()`` returns only what
we own (``magw.drivers.netlink.constants``); ``apply()`` carries out a ChangeSet's
ops in order, each on its own, and touches only what we own (an op on anything else
fails with EPERM: our guard, not the kernel's).

Driver semantics (``magw.reconcile.driver``, the same for the netlink driver):
``create`` and ``replace`` both mean "make it exist with exactly this content", so
create over an object of ours with different content replaces it; the one
exception is a route of another protocol under the key of a route ``create``:
EEXIST, and the foreign route stays. Delete of a missing object succeeds.

The kernel's refusals, with errno and message, are in
``magw.drivers.netlink.fake.checks``; the tables and the kernel's side effects
(deleting a link takes what hangs on it, and so on) in
``magw.drivers.netlink.fake.tables``. A link replace of mtu/mac/up keeps every
dependent; a change of vni/port (which the kernel refuses in place: EOPNOTSUPP
"Cannot change VNI") or of local/learning is a delete plus create, as the netlink
driver does it, so dependents go. A route's kernel key is (table, dst, tos,
metric) without the protocol: a replace takes a foreign route over
(NLM_F_REPLACE), a delete (which names our protocol) leaves it alone.

Not modelled, on purpose (``NOT_MODELLED``; tests/unit/drivers/test_fake_netlink.py pins the list):
"""

from __future__ import annotations

from collections.abc import Hashable
from ipaddress import IPv4Interface

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
from magw.drivers.netlink.constants import (
    OWNED_ADDRESS_DEVICES,
    OWNED_LINKS,
    OWNED_RULE_PRIORITIES,
    OWNED_TABLES,
    RTPROT_MAGW,
    owns_nexthop,
)
from magw.drivers.netlink.fake.checks import (
    AnyLink,
    ForeignLink,
    KernelError,
    check_id_replace,
    check_link,
    kind_of,
    normalize,
)
from magw.drivers.netlink.fake.tables import NetlinkTables
from magw.drivers.netlink.fake.text import dump_lines
from magw.reconcile.changeset import ChangeSet, NftChange, Op, key_text
from magw.reconcile.driver import ApplyResult, Failure

__all__ = ["NOT_MODELLED", "RTPROT_BOOT", "FakeNetlink", "ForeignLink", "KernelError", "is_owned"]

# What the kernel (or the netlink driver) does that the fake deliberately does not; rendered into the doc above.
NOT_MODELLED: tuple[str, ...] = (
    "IPv6: addresses, neighbors, routes and nexthops are IPv4 only",
    "route types other than unicast and unreachable (the kernel driver observes them as unicast without a path)",
    "neighbor states other than nud permanent, dynamic FDB entries, FDB entries with several destinations",
    "a non-VXLAN device under one of our link names is not observed (the kernel driver observes it with vni 0)",
    "several rules at one of our priorities, or one with selectors (the kernel driver observes table 0)",
    "the kernel's extack wording: the errno names match, the message texts are the fake's own",
    "route metrics, tos and flags beyond the key; nexthop_compat_mode's expansion of nhid routes",
    "a link MAC change flushing neighbors (the netlink driver puts the permanent ones back, so none is lost)",
)
__doc__ = (__doc__ or "") + "".join(f"\n- {item}" for item in NOT_MODELLED) + "\n"

log = structlog.get_logger(__name__)

# The protocol `ip route add` gives a route when none is named ("proto boot").
RTPROT_BOOT = 3

# Link fields changed only by delete + create (the netlink driver's choice; see the module doc).
_RECREATE_FIELDS = ("vni", "port", "local", "learning", "external", "gpe")


def is_owned(obj: NetObject | ForeignLink, protocol: int = RTPROT_MAGW) -> bool:
    """Whether magw owns ``obj``; a route also by its ``protocol``."""
    if isinstance(obj, Link | ForeignLink):
        return obj.name in OWNED_LINKS
    if isinstance(obj, Address):
        return obj.dev in OWNED_ADDRESS_DEVICES
    if isinstance(obj, Neighbor | Fdb):
        return obj.dev in OWNED_LINKS
    if isinstance(obj, Nexthop | NexthopGroup):
        return owns_nexthop(obj.id)
    if isinstance(obj, Route):
        return protocol == RTPROT_MAGW and obj.table in OWNED_TABLES
    return obj.priority in OWNED_RULE_PRIORITIES


@attrs.define
class FakeNetlink(NetlinkTables):
    """Kernel-like netlink state of one namespace.

    ``check_prefsrc``: like the kernel, refuse a unicast route whose ``src`` is not an
    address of the namespace (EINVAL "Invalid prefsrc address"). Our routes use the
    node's CNI IP, so give it first: ``fake.add_foreign_address("cni0", "10.1.3.1/24")``.
    """

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
        self._copy_tables_to(new)
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
        """Make ``obj`` exist with exactly this content; only a foreign route under its key is EEXIST."""
        existing = None if isinstance(obj, Rule) else self._lookup(kind_of(obj), obj.key)
        if isinstance(existing, tuple) and existing[1] != RTPROT_MAGW:
            raise KernelError(
                "EEXIST", f"File exists (routes {key_text(obj.key)} is held by a route of protocol {existing[1]})"
            )
        if existing != ((obj, RTPROT_MAGW) if isinstance(obj, Route) else obj):
            self._replace(obj, RTPROT_MAGW)

    def _replace(self, obj: NetObject | ForeignLink, protocol: int) -> None:
        if isinstance(obj, Rule):
            if is_owned(obj):  # one rule per priority of ours; foreign priorities may hold several
                self.remove("rules", obj.priority)
            self._rules[(obj.priority, obj.table, obj.iif or "")] = obj
            return
        existing = self._lookup(kind_of(obj), obj.key)
        if isinstance(existing, Link | ForeignLink) and isinstance(obj, Link | ForeignLink):
            self._replace_link(existing, obj)
            return
        if isinstance(existing, Nexthop | NexthopGroup) and isinstance(obj, Nexthop | NexthopGroup):
            check_id_replace(existing, obj)
        self._install(obj, protocol)  # a route's NLM_F_REPLACE takes over a foreign route under the same key

    def _replace_link(self, old: AnyLink, new: AnyLink) -> None:
        if isinstance(old, ForeignLink) and isinstance(new, Link) and is_owned(new):
            self._remove_link(old.name)  # a non-VXLAN device under our name: the netlink driver re-creates it
        elif type(old) is not type(new):
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


def _recreate(old: Link, new: Link) -> bool:
    return any(getattr(old, f) != getattr(new, f) for f in _RECREATE_FIELDS)
