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
from magw.model import Snapshot

MIN_LINK_MTU = 68  # the IPv4 minimum; the kernel refuses a smaller MTU on a vxlan device


def check_cidrs(snapshot: Snapshot) -> None:
    """Reject CIDRs of two clusters that overlap: routes and nft sets would be ambiguous.

    One sweep over the prefixes sorted by start: two CIDRs overlap only when one
    contains the other, so each prefix need only be checked against the widest
    one still open.
    """
    owned = sorted(((net, c.id) for c in snapshot.clusters for net in c.cidrs), key=lambda t: (t[0], t[1]))
    cover: tuple[IPv4Network, str] | None = None
    for net, cid in owned:
        if cover is not None and net.overlaps(cover[0]):
            if cid != cover[1]:
                raise ValueError(f"clusters: {net} of cluster {cid!r} overlaps {cover[0]} of cluster {cover[1]!r}")
            continue
        cover = (net, cid)


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
