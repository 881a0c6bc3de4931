"""The planner: ``plan(snapshot, node) -> DesiredState``. Pure: no I/O, no clock, no randomness.

It decides the node's role (gateway or worker, see :mod:`magw.desired.roles`),
then assembles the VXLAN meshes (:mod:`~magw.desired.vxlan`), the routing
objects (:mod:`~magw.desired.paths`) and the nft table
(:mod:`~magw.desired.nftplan`). docs/planner.md explains every object.
"""

from __future__ import annotations

from ipaddress import IPv4Network

from magw.desired.nftplan import plan_nft
from magw.desired.paths import plan_routing
from magw.desired.roles import node_role
from magw.desired.state import DesiredState
from magw.desired.vtep import VXLAN_OVERHEAD
from magw.desired.vxlan import plan_vxlan
from magw.gcpause import gc_paused
from magw.model import Snapshot, net_key

MIN_LINK_MTU = 68  # the IPv4 minimum; the kernel refuses a smaller MTU on a vxlan device


def check_cidrs(snapshot: Snapshot) -> None:
    """Reject CIDRs of two clusters that overlap: routes and nft sets would be ambiguous.

    One sweep over the prefixes sorted by start: two CIDRs overlap only when one
    contains the other, so each prefix need only be checked against the widest
    one still open. The sweep runs on ``(start, prefixlen, end)`` integers (issue 10:
    sorting ``IPv4Network`` objects was a profile hot spot); the order is the one
    ``IPv4Network`` objects sort in.
    """
    owned = sorted(
        (start, plen, start + (1 << (32 - plen)) - 1, c.id, net)
        for c in snapshot.clusters
        for net in c.cidrs
        for start, plen in (net_key(net),)
    )
    cover: tuple[int, IPv4Network, str] | None = None  # (last address, network, cluster id)
    for _, _, last, cid, net in owned:
        if cover is not None and last <= cover[0]:  # starts inside the cover, so it lies inside it
            if cid != cover[2]:
                raise ValueError(f"clusters: {net} of cluster {cid!r} overlaps {cover[1]} of cluster {cover[2]!r}")
            continue
        cover = (last, net, cid)


def check_snapshot(snapshot: Snapshot) -> None:
    """Reject input the planner cannot turn into a consistent state (ValueError, one line)."""
    mtu = snapshot.config.underlay_mtu
    if mtu - VXLAN_OVERHEAD < MIN_LINK_MTU:
        raise ValueError(f"config.underlay_mtu: {mtu} leaves the VXLAN devices below the minimum MTU {MIN_LINK_MTU}")
    check_cidrs(snapshot)


def plan(snapshot: Snapshot, node: str) -> DesiredState:
    """The desired state of ``node`` (a node of the local cluster).

    Raises KeyError for an unknown node and ValueError for inconsistent input
    (unknown local cluster, overlapping cluster CIDRs, VTEP collisions, MTU).
    """
    with gc_paused():  # magw.gcpause: nothing cyclic is built here, and the collector cost a quarter
        return _plan(snapshot, node)


def _plan(snapshot: Snapshot, node: str) -> DesiredState:
    check_snapshot(snapshot)
    role = node_role(snapshot, node)
    vxlan = plan_vxlan(snapshot, role)
    routing = plan_routing(snapshot, role)
    return DesiredState(
        links=vxlan.links,
        addresses=vxlan.addresses,
        neighbors=vxlan.neighbors,
        fdb=vxlan.fdb,
        nexthops=routing.nexthops,
        groups=routing.groups,
        routes=routing.routes,
        rules=routing.rules,
        nft=plan_nft(snapshot, role),
    )
