"""The pure diff engine: ``diff(desired, observed) -> ChangeSet``.

Objects of each kind are matched by ``.key``: a key only in ``desired`` is a
``create``, a key in both with different fields is a ``replace`` (``old`` = what
was observed), a key only in ``observed`` is a ``delete``.

Order of the operations
=======================

1. Creates and replaces in forward ``KINDS`` order (links, addresses, neighbors,
   fdb, nexthops, groups, routes, rules), by key within a kind.
2. Then deletes in reverse ``KINDS`` order (rules, routes, groups, nexthops, fdb,
   neighbors, addresses, links), by key within a kind.

Why the kernel accepts every step of that order:

- Each kind refers only to kinds before it (an address/neighbor/FDB entry to its
  link, a nexthop to its link and to an on-link address, a group to its member
  nexthops, a route to a group/nexthop or inline to a link and an address, a rule
  to a table of routes). Creating forward means every reference exists when it is
  made; deleting in reverse means nothing is deleted while something kept still
  refers to it. In between, during phase 1, old and new objects coexist.
- Failover or recovery changes only a group's member set: one group ``replace``
  (the group id is keyed by remote cluster), routes are untouched.
- A group gaining a member whose nexthop is new: the nexthop create comes first
  (nexthops before groups). A group losing a member: the group replace comes in
  phase 1, the nexthop delete in phase 2, so the kernel never removes the member
  from a group behind our back.
- A route moving from a group to ``unreachable`` (or to another group, or to
  inline paths) is replaced in phase 1; the old group is deleted in phase 2,
  after nothing uses it (deleting a group that a route uses would delete the route).
- Strategy change: group ids differ by group type (``magw.desired.node.ids``), so new
  groups are created, routes replaced to point at them, old groups deleted.
  Resilient/group -> multipath: routes become inline first, then groups and
  nexthops go. Multipath -> groups: nexthops and groups exist before routes move.
- Rules are created last (their table is filled first) and deleted first (traffic
  stops being diverted before the table empties).

Where that order is NOT valid, and what we do instead
=====================================================

Some changes cannot be made in place; the kernel refuses them:

- a VXLAN link whose ``vni`` or ``port`` changes (kernel: EOPNOTSUPP "Cannot change
  VNI" / "Cannot change port"); the drivers also recreate on ``local``/``learning``
  changes (``LINK_FIXED_FIELDS``);
- a group whose type changes (EINVAL "Can not replace a nexthop group with one of
  a different type") or a resilient group whose bucket count changes (EINVAL "Can
  not change number of buckets of a resilient nexthop group");
- an id that is a group on one side and a plain nexthop on the other (nexthops and
  groups share one id space; EINVAL "Can not replace a nexthop with a nexthop group").

For those the old object is deleted and the new one created, at the START of the
section of its kind in phase 1 (before that kind's creates). Deleting it makes the
kernel delete its dependents too: a link takes its addresses, neighbors, FDB
entries, nexthops and routes through it; a nexthop leaves its groups (an empty
group is deleted) and takes routes using it; a group takes routes using it. So
every desired object in that closure is emitted again as a ``replace`` (which
creates a missing object) in its own section, even if it was equal before. The
deleted object is not deleted again in phase 2: with a shared id space that
second delete would remove the new object. Changing a resilient group's bucket
count therefore leaves its routes missing for the few operations in between.

A link replace of mutable fields only (mtu, mac, up) keeps every dependent. Setting
a link down makes the kernel flush nexthops on it; a desired state with a down link
cannot hold nexthops through it anyway, so nothing is re-emitted for that.

nftables: when desired and observed differ only in set/map elements (same key,
sets, maps, chains and rules), the difference is one ``NftChange`` carrying an
element delta (``magw.reconcile.nftdelta``): the driver sends only the changed
elements. Any other difference in a table that exists is one ``NftChange`` carrying
an in-place update (``magw.reconcile.nftupdate``: unchanged chains and sets kept,
in one transaction), or replacing the whole table in one transaction when no update
will do; a table no longer desired is one ``NftChange(table=None)``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterator

from magw.desired.nft.values import NftTable
from magw.desired.state import KINDS, DesiredState, Link, NetObject, NexthopGroup, int_key
from magw.reconcile.changeset import ChangeSet, NftChange, Op
from magw.reconcile.nftdelta import element_delta
from magw.reconcile.nftupdate import table_update

# Link fields that change only by deleting and recreating the link.
LINK_FIXED_FIELDS: tuple[str, ...] = ("vni", "port", "local", "learning")

Ref = tuple[str, Hashable]  # (kind, key)
Index = dict[str, dict[Hashable, NetObject]]


def diff(desired: DesiredState, observed: DesiredState) -> ChangeSet:
    """The operations that turn ``observed`` into ``desired``, in an order the kernel accepts: ``diff_ops`` and
    ``diff_nft`` together (the two are independent: ``magw apply`` starts the nft transaction before it diffs
    the netlink objects)."""
    return ChangeSet(ops=diff_ops(desired, observed), nft=diff_nft(desired, observed))


def diff_ops(desired: DesiredState, observed: DesiredState) -> tuple[Op, ...]:
    """The netlink operations, in an order the kernel accepts.

    Objects that are the very same object on both sides cannot differ, and are passed over (docs/performance.md): the
    reconciler's known state keeps the planner's tuples once they settled, and the planner's memo hands the
    same objects (and the same tuple, when nothing under it changed) back. So an Endpoint change under 100k
    routes compares no route, and a node joining a 5,000-node cluster indexes two neighbors, not 10,000.
    Recreating an object can make the kernel drop objects of any kind, so when that happens every object is
    indexed, as if nothing were shared.
    """
    same = frozenset(kind for kind in KINDS if desired.of_kind(kind) is observed.of_kind(kind))
    want, have = _indexes(desired, observed, same)
    early = _early_deletes(want, have, desired, same)
    if early:
        want, have = _indexes(desired, observed, None)
        early = _early_deletes(want, have, desired, frozenset())
    dropped = _closure(early, observed)
    early_refs = {ref for refs in early.values() for ref in refs}
    return (*_forward(want, have, early, dropped), *_backward(want, have, early_refs))


def diff_nft(desired: DesiredState, observed: DesiredState) -> tuple[NftChange, ...]:
    """The nft changes: our main table, then the extra tables in (family, name) order."""
    nft = nft_changes(desired.nft, observed.nft)
    if desired.extra_nft or observed.extra_nft:
        want_t = {(t.family, t.name): t for t in desired.extra_nft}
        have_t = {(t.family, t.name): t for t in observed.extra_nft}
        for key in sorted(want_t.keys() | have_t.keys()):
            nft += nft_changes(want_t.get(key), have_t.get(key))
    return nft


def nft_changes(desired: NftTable | None, observed: NftTable | None) -> tuple[NftChange, ...]:
    """One change per table that differs: the changed elements only when nothing else differs, else the table
    changed in place, else the whole table; the new table comes before the old one's removal."""
    if desired is observed or desired == observed:
        return ()
    if desired is not None and observed is not None:
        delta = element_delta(desired, observed)
        if delta is not None:
            return (NftChange(family=desired.family, name=desired.name, table=desired, elements=delta),)
        update = table_update(desired, observed)
        if update is not None:
            return (NftChange(family=desired.family, name=desired.name, table=desired, update=update),)
    changes: list[NftChange] = []
    if desired is not None:
        changes.append(NftChange(family=desired.family, name=desired.name, table=desired))
    if observed is not None and (desired is None or desired.key != observed.key):
        changes.append(NftChange(family=observed.family, name=observed.name, table=None))
    return tuple(changes)


def _indexes(desired: DesiredState, observed: DesiredState, same: frozenset[str] | None) -> tuple[Index, Index]:
    """Both sides' objects by key, per kind, leaving out what no operation can come from when ``same`` is
    given: a kind in ``same`` (one tuple on both sides) entirely, and in a kind outside the nexthops' and
    groups' shared id space every object found on both sides (by identity: a set of ids is C code, where
    comparing attrs objects is Python). ``same=None``: everything."""
    want: Index = {}
    have: Index = {}
    for kind in KINDS:
        mine, theirs = desired.of_kind(kind), observed.of_kind(kind)
        if same is not None and kind in same:
            want[kind], have[kind] = {}, {}
        elif same is not None and kind not in _SHARED_ID_SPACE and mine and theirs:
            common = set(map(id, mine)).intersection(map(id, theirs))
            want[kind] = {int_key(obj): obj for obj in mine if id(obj) not in common}
            have[kind] = {int_key(obj): obj for obj in theirs if id(obj) not in common}
        else:
            want[kind] = {int_key(obj): obj for obj in mine}
            have[kind] = {int_key(obj): obj for obj in theirs}
    return want, have


def _must_recreate(old: NetObject, new: NetObject) -> bool:
    """True when the kernel cannot turn ``old`` into ``new`` in place (same kind, same key)."""
    if isinstance(old, Link) and isinstance(new, Link):
        return any(getattr(old, f) != getattr(new, f) for f in LINK_FIXED_FIELDS)
    if isinstance(old, NexthopGroup) and isinstance(new, NexthopGroup):
        return old.type != new.type or (new.type == "resilient" and old.buckets != new.buckets)
    return False


_SHARED_ID_SPACE = {"nexthops": "groups", "groups": "nexthops"}


def _early_deletes(want: Index, have: Index, desired: DesiredState, same: frozenset[str]) -> dict[str, list[Ref]]:
    """Observed objects to delete at the start of a kind's section, keyed by that section's kind."""
    early: dict[str, list[Ref]] = defaultdict(list)
    for kind in KINDS:
        other = _SHARED_ID_SPACE.get(kind)
        keys = want[kind]
        if kind in same and other is not None and other not in same:
            # Not indexed, yet an id that leaves the other kind may be one of this kind's: index it then.
            going = have[other].keys() - want[other].keys()
            keys = {int_key(obj): obj for obj in desired.of_kind(kind)} if going else {}
        for key, new in keys.items():
            old = have[kind].get(key)
            if old is not None and old != new and _must_recreate(old, new):
                early[kind].append((kind, key))
            elif other is not None and key in have[other] and key not in want[other]:
                early[kind].append((other, key))
    return early


def _closure(early: dict[str, list[Ref]], observed: DesiredState) -> set[Ref]:
    """Everything the kernel deletes (or changes) along with the early deletes, including them."""
    todo = [ref for refs in early.values() for ref in refs]
    if not todo:
        return set()
    deps = _dependents(observed)
    seen: set[Ref] = set()
    while todo:
        ref = todo.pop()
        if ref not in seen:
            seen.add(ref)
            todo.extend(deps.get(ref, ()))
    return seen


def _dependents(observed: DesiredState) -> dict[Ref, list[Ref]]:
    """For each object, the objects the kernel removes or changes when it is deleted."""
    deps: dict[Ref, list[Ref]] = defaultdict(list)
    for addr in observed.addresses:
        deps[("links", addr.dev)].append(("addresses", addr.key))
    for neigh in observed.neighbors:
        deps[("links", neigh.dev)].append(("neighbors", int_key(neigh)))
    for fdb in observed.fdb:
        deps[("links", fdb.dev)].append(("fdb", fdb.key))
    for nh in observed.nexthops:
        deps[("links", nh.dev)].append(("nexthops", nh.key))
    for group in observed.groups:
        for member in group.members:
            deps[("nexthops", member.id)].append(("groups", group.key))
    for route in observed.routes:
        ref = ("routes", int_key(route))
        if route.nhid is not None:
            deps[("nexthops", route.nhid)].append(ref)
            deps[("groups", route.nhid)].append(ref)
        for path in route.nexthops:
            deps[("links", path.dev)].append(ref)
    return deps


def _forward(want: Index, have: Index, early: dict[str, list[Ref]], dropped: set[Ref]) -> Iterator[Op]:
    for kind in KINDS:
        for old_kind, key in early.get(kind, ()):
            yield Op(verb="delete", kind=old_kind, obj=have[old_kind][key])
        recreated = {key for old_kind, key in early.get(kind, ()) if old_kind == kind}
        for key, new in want[kind].items():
            old = have[kind].get(key)
            if old is None or key in recreated:
                yield Op(verb="create", kind=kind, obj=new)
            elif old != new or (kind, key) in dropped:
                yield Op(verb="replace", kind=kind, obj=new, old=old)


def _backward(want: Index, have: Index, early_refs: set[Ref]) -> Iterator[Op]:
    for kind in reversed(KINDS):
        for key, old in have[kind].items():
            if key not in want[kind] and (kind, key) not in early_refs:
                yield Op(verb="delete", kind=kind, obj=old)
