"""A dead gateway's group replaces, made from the known state alone, before the sync that follows. Pure.

When the probes take a gateway down, the route agent's sync replans the node and replaces each nexthop group that
held the gateway. On a loaded 2-CPU lab that reaction took 13-43 ms from the down verdict to the replace in the
kernel (docs/performance.md row 38b): 6-14 ms to hand the sync to the reconciler's worker thread, 4-9 ms to plan and
diff, 1-7 ms for the replace. All of that time the dead gateway's flows are lost. The replaces themselves need no
plan: they are the groups the kernel holds (the reconciler's known state) with the dead gateway's nexthops taken
out. ``failover_ops`` makes them from that state and the monitor's verdict; the route agent applies them at once,
on the event loop (``Reconciler.apply_now``), and the sync that follows finds them done.

It does only what the planner would do too, and leaves everything else to the sync:

- a group whose members would all be gone is left alone (the planner's fail static keeps every candidate);
- a group that still holds a doubtful peer, one health calls down or limits to some clusters (a local gateway
  that lost its reach of some), is left alone: it may be in fail static (every candidate kept because none was
  usable for its clusters; a live gateway is in such a group only if its own reach is limited), and what it
  becomes only the plan knows;
- nothing but group members changes: no route moves, no group is made or deleted, no nft rule changes.

If the verdict is withdrawn before the sync runs, the sync plans with the gateway up again and puts it back: the
known state holds what was applied, so the diff sees the difference.
"""

from __future__ import annotations

from collections.abc import Collection
from ipaddress import IPv4Address

import attrs

from magw.desired.state import DesiredState, NexthopGroup
from magw.reconcile.changeset import Op


def failover_ops(
    known: DesiredState, dead: Collection[IPv4Address], doubtful: Collection[IPv4Address]
) -> tuple[Op, ...]:
    """Replaces of the groups in ``known`` that hold a nexthop via one of ``dead`` (the peers just called down),
    without those nexthops; ``doubtful``: the peers health calls down or limits to some clusters. Sorted by id."""
    if not dead:
        return ()
    via = {n.id: n.via for n in known.nexthops}
    dead_ids = {i for i, address in via.items() if address in dead}
    if not dead_ids:
        return ()
    doubtful_ids = {i for i, address in via.items() if address in doubtful}
    ops: list[Op] = []
    for group in sorted(known.groups, key=lambda g: g.id):
        ids = {m.id for m in group.members}
        if not ids & dead_ids:
            continue
        kept = tuple(m for m in group.members if m.id not in dead_ids)
        if not kept or any(m.id in doubtful_ids for m in kept):
            continue
        new: NexthopGroup = attrs.evolve(group, members=kept)
        ops.append(Op(verb="replace", kind="groups", obj=new, old=group))
    return tuple(ops)
