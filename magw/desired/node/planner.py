"""The planner: ``plan(snapshot, node) -> DesiredState``. Pure: no I/O, no clock, no randomness.

It decides the node's role (gateway or worker, see :mod:`magw.desired.node.roles`),
then assembles the VXLAN meshes (:mod:`~magw.desired.node.vxlan`), the routing
objects (:mod:`~magw.desired.node.paths`) and the nft table
(:mod:`~magw.desired.nft.plan`); with ``cni: ovn`` the node side of OVN-Kubernetes
(:mod:`~magw.desired.ovn.node`). docs/planner.md explains every object.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.desired.cable.plan import plan_wireguard
from magw.desired.egressgw.node import plan_node_egressgw
from magw.desired.globalnet.plan import globalnet_mode
from magw.desired.nft.plan import plan_nft
from magw.desired.node import clientip
from magw.desired.node.memo import PlanMemo
from magw.desired.node.paths import RoutingObjects, plan_routing
from magw.desired.node.roles import node_role
from magw.desired.node.vxlan import inter_mtu, plan_vxlan
from magw.desired.ovn.node import plan_ovn_gateway, plan_ovn_worker
from magw.desired.state import DesiredState, Route, sorted_objects
from magw.model import Cni, Snapshot, net_key
from magw.util.gcpause import gc_paused

MIN_LINK_MTU = 68  # the IPv4 minimum; the kernel refuses a smaller MTU on a vxlan device


def check_cidrs(snapshot: Snapshot) -> None:
    """Reject CIDRs of two clusters that overlap: routes and nft sets would be ambiguous.

    With Globalnet, pod and service CIDRs may be shared between clusters (that is what Globalnet is for);
    global CIDRs then must overlap nothing, neither each other nor any pod or service CIDR.

    One sweep over the prefixes sorted by start: two CIDRs overlap only when one
    contains the other, so each prefix need only be checked against the widest
    one still open. The sweep runs on ``(start, prefixlen, end)`` integers (docs/performance.md:
    sorting ``IPv4Network`` objects was a profile hot spot); the order is the one
    ``IPv4Network`` objects sort in.
    """
    globalnet = globalnet_mode(snapshot)
    owners: list[tuple[IPv4Network, str, str]] = []  # (network, owner used for the conflict, text for errors)
    for c in snapshot.clusters:
        if globalnet:
            owners += [(net, "local addresses", f"cluster {c.id!r}") for net in (*c.pod_cidrs, *c.service_cidrs)]
            owners += [(net, c.id, f"cluster {c.id!r} (global)") for net in c.global_cidrs]
        else:
            owners += [(net, c.id, f"cluster {c.id!r}") for net in c.cidrs]
    owned = sorted(
        (*net_key(net), net_key(net)[0] + (1 << (32 - net.prefixlen)) - 1, net, o, t) for net, o, t in owners
    )
    cover: tuple[int, IPv4Network, str, str] | None = None  # (last address, network, owner, text)
    for _, _, last, net, owner, text in owned:
        if cover is not None and last <= cover[0]:  # starts inside the cover, so it lies inside it
            if owner != cover[2]:
                raise ValueError(f"clusters: {net} of {text} overlaps {cover[1]} of {cover[3]}")
            continue
        cover = (last, net, owner, text)


def check_snapshot(snapshot: Snapshot, memo: PlanMemo) -> None:
    """Reject input the planner cannot turn into a consistent state (ValueError, one line).

    The CIDR check is skipped when the clusters are the very objects the memo's last plan checked (0.43 s of
    a 100k-CIDR plan in the profile): they passed then, and the check reads nothing else. It is skipped as
    well for the very cluster objects the snapshot loader checked (``Snapshot.overlaps_checked_here``): its
    check rejects the same overlaps, Globalnet's rules included (``magw.snapshot.checks.check_overlaps``).
    """
    mtu = snapshot.config.underlay_mtu
    if inter_mtu(snapshot.config) < MIN_LINK_MTU:
        raise ValueError(f"config.underlay_mtu: {mtu} leaves the VXLAN devices below the minimum MTU {MIN_LINK_MTU}")
    globalnet = globalnet_mode(snapshot)  # also refuses a clusterset that is Globalnet in part
    if snapshot.overlaps_checked_here():
        return
    memo.get("check_cidrs", snapshot.clusters, lambda: check_cidrs(snapshot), values=globalnet)


def plan(
    snapshot: Snapshot,
    node: str,
    *,
    ovn_mgmt_nexthop: IPv4Address | None = None,
    memo: PlanMemo | None = None,
    main_group: int | None = None,
) -> DesiredState:
    """The desired state of ``node`` (a node of the local cluster).

    ``memo``: a daemon that plans the same node again and again passes one memo every time; pieces whose
    inputs are the very objects of the last plan are reused (magw.desired.node.memo). The result is the same.

    ``ovn_mgmt_nexthop``: with ``config.cni: ovn``, the next hop of OVN's management port on this node (the
    route agent's ``--ovn-mgmt-nexthop``); None derives it from the node's ``cni_ip`` (magw.desired.ovn.node).
    ``main_group``: on a worker, the id of the group its remote clusters share (magw.desired.node.classes:
    ``adopted_main`` of the group ids the kernel held when the caller started); None: the reserved id.
    Raises KeyError for an unknown node and ValueError for inconsistent input
    (unknown local cluster, overlapping cluster CIDRs, VTEP collisions, MTU).
    """
    memo = PlanMemo() if memo is None else memo
    with gc_paused(), memo.round():  # magw.util.gcpause: nothing cyclic is built here, and the collector cost a quarter
        return _plan(snapshot, node, ovn_mgmt_nexthop, memo, main_group)


def _plan(
    snapshot: Snapshot, node: str, ovn_mgmt_nexthop: IPv4Address | None, memo: PlanMemo, main_group: int | None
) -> DesiredState:
    check_snapshot(snapshot, memo)
    role = node_role(snapshot, node)
    vxlan = plan_vxlan(snapshot, role, memo)
    routing = plan_routing(snapshot, role, memo, main_group)
    if snapshot.config.cni is Cni.OVN and not role.gateway:  # OVN carries pods: no pod routes, table 150 only
        ovn = plan_ovn_worker(snapshot, role, ovn_mgmt_nexthop)
        routing = RoutingObjects(nexthops=(), groups=(), routes=ovn.routes, rules=ovn.rules)
    elif snapshot.config.cni is Cni.OVN:  # the gateway datapath unchanged, plus ovn-k8s-sub0 and table 149
        ovn = plan_ovn_gateway(snapshot)
        routes = _joined(memo, "ovn_routes", routing.routes, ovn.routes)
        routing = attrs.evolve(routing, routes=routes, rules=(*routing.rules, *ovn.rules))
        vxlan = attrs.evolve(vxlan, addresses=(*vxlan.addresses, *ovn.addresses))
    if clientip.enabled(snapshot):
        ci_routes, ci_rules = clientip.plan_routing(snapshot, role)
        routes = _joined(memo, "client_ip_routes", routing.routes, ci_routes)
        routing = attrs.evolve(routing, routes=routes, rules=(*routing.rules, *ci_rules))
    state = DesiredState(
        links=vxlan.links,
        addresses=vxlan.addresses,
        neighbors=vxlan.neighbors,
        fdb=vxlan.fdb,
        nexthops=routing.nexthops,
        groups=routing.groups,
        routes=routing.routes,
        rules=routing.rules,
        nft=plan_nft(snapshot, role, memo),
        cable=plan_wireguard(snapshot, role),
    )
    egressgw = plan_node_egressgw(snapshot, node)
    return state if egressgw is None else _with_egressgw(state, egressgw.state, memo)


def _joined(memo: PlanMemo, slot: str, base: tuple[Route, ...], extra: tuple[Route, ...]) -> tuple[Route, ...]:
    """``base`` and ``extra`` sorted as one, the last plan's tuple while ``base`` is the same object and
    ``extra`` (a few routes) equal: the 100k routes of ``base`` are not sorted again for them."""
    if not extra:
        return base
    return memo.get(slot, (base,), lambda: sorted_objects((*base, *extra)), values=extra)


def _with_egressgw(state: DesiredState, egressgw: DesiredState, memo: PlanMemo) -> DesiredState:
    """``state`` plus the egress gateway's objects (magw.desired.egressgw): its own device, tables 12001-12255,
    rules at those priorities and its own nft table, so nothing of it can collide with the rest."""
    return attrs.evolve(
        state,
        links=(*state.links, *egressgw.links),
        addresses=(*state.addresses, *egressgw.addresses),
        routes=_joined(memo, "egress_routes", state.routes, egressgw.routes),
        rules=(*state.rules, *egressgw.rules),
        extra_nft=(*state.extra_nft, *((egressgw.nft,) if egressgw.nft is not None else ())),
    )
