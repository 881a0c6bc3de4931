"""A worker's remote clusters grouped by the local gateways they can use: one nexthop group per class. Pure.

On a worker every remote cluster's routes go to the local gateways usable for it. Clusters whose usable set is
the same form a *class* and share one group, so a local gateway's failure or return, which changes every
cluster's set the same way, is one group replace whatever the number of remote clusters (docs/health.md, "A
local gateway's failure in O(1)"). Group ids must not follow the member set, or that replace would become a
new group and every route would move (and a new resilient group starts with a fresh bucket table, moving
flows that never crossed the gateway). So:

- the *main* class, the one with the most clusters, takes the reserved id ``main_group_id`` whatever its
  members: in steady state every cluster is in it, and a gateway that dies or returns everywhere leaves it
  the main class under the same id;
- every other class (clusters whose usable set differs: a gateway that lost its reach of some clusters but not
  of the others) takes the id of its first cluster (``group_ids``), so a split moves only those clusters'
  routes, and their return to the main class moves them back.

Ties for the main class go to the class with more members, then to the one whose first cluster sorts first:
the result depends only on the input. The main class changes (and the routes of the old and new main classes
move) only when another class outgrows it: a gateway losing more than half of the clusters one by one.

**Adopting the kernel's group.** A node that already holds a group of ours (an older build made one per
cluster; or ``magw apply`` before) would otherwise move every route to the new id, and a new resilient group
spreads flows afresh. So the caller reads the group ids the kernel holds when it starts (``held``) and
``adopted_main`` picks the one the main class keeps: the reserved id if it is there, else the lowest held id
of the strategy's type. A side class whose own id is the adopted one takes the reserved id instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from magw.desired.node.ids import group_ids, is_group_id, main_group_id

Members = tuple[int, ...]  # sorted nexthop ids


def classes(usable: Iterable[tuple[str, Members]]) -> dict[Members, list[str]]:
    """The clusters of each usable set, in input order (clusters without a usable gateway are left out)."""
    out: dict[Members, list[str]] = {}
    for cluster, members in usable:
        if members:
            out.setdefault(members, []).append(cluster)
    return out


def main_class(by_members: Mapping[Members, list[str]]) -> Members | None:
    """The usable set of the main class: most clusters, then most members, then the first cluster's id."""
    if not by_members:
        return None
    return min(by_members, key=lambda m: (-len(by_members[m]), -len(m), min(by_members[m])))


def adopted_main(held: Iterable[int], *, resilient: bool) -> int:
    """The main class's id given the group ids the kernel held at start: the reserved one if held, else the
    lowest held group id of the strategy's type, else the reserved one."""
    reserved = main_group_id(resilient=resilient)
    ours = sorted(i for i in held if is_group_id(i, resilient=resilient))
    return reserved if reserved in ours or not ours else ours[0]


def class_group_ids(
    usable: Iterable[tuple[str, Members]], all_clusters: Iterable[str], *, resilient: bool, main_id: int | None = None
) -> dict[str, int]:
    """The group id of each cluster that has a usable gateway: shared by its class (see the module's docstring).

    ``all_clusters``: every remote cluster id, usable or not, so a cluster's own id does not depend on which
    others are reachable (``group_ids`` probes on collisions over the whole set). ``main_id``: the main class's
    id (``adopted_main``); None or one of another type: the reserved id.
    """
    reserved = main_group_id(resilient=resilient)
    if main_id is None or not is_group_id(main_id, resilient=resilient):
        main_id = reserved
    by_members = classes(usable)
    main = main_class(by_members)
    own = group_ids(all_clusters, resilient=resilient)
    ids: dict[str, int] = {}
    for members, clusters in by_members.items():
        gid = main_id if members == main else own[min(clusters)]
        if members != main and gid == main_id:  # the adopted id was this class's own: it takes the reserved one
            gid = reserved
        ids.update((c, gid) for c in clusters)
    return ids
