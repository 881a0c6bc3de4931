"""The Globalnet controller's whole decision as one pure function: ``plan_globalnet``.

Input: the cluster's global CIDRs, its gateway nodes, every Globalnet object with the statuses as read,
the time. Output (``GlobalnetPlan``): the status every live object must have, the controller-made objects
that must exist (per-gateway ClusterGlobalEgressIPs, GlobalIngressIPs), each pod's egress source, the
pool's use. The controller writes what differs from what it read and deletes what the plan dropped.

Order of work, which makes it deterministic and leak-free (docs/globalnet.md):

1. **Reserve.** Every address recorded in a live object's status is reserved first, objects in sorted
   reference order (a conflict goes to the first). Nothing is allocated before every recorded address is
   held, so a restarted controller never hands out an address some object still has.
2. **Allocate.** Then objects that lack addresses get the lowest free runs, in sorted order (gateways in
   name order). With ``allocation_blocked`` (some status could not be read) nothing is allocated: those
   objects are listed in ``waiting`` and keep the status they had.
3. A deleted object is simply not reserved: its addresses are free at once, whether or not its status was
   ever written.

Per-gateway egress (docs/globalnet.md, "Several gateways"): a ClusterGlobalEgressIP per gateway node
(``<node>-cluster-egress.submariner.io``, made here, ``numberOfIPs`` from the template
``cluster-egress.submariner.io``, default 8) and, for a GlobalEgressIP, ``numberOfIPs`` addresses per
gateway. A gateway that disappears keeps its blocks, marked ``gone_since``, for ``grace``; after that they
are freed. One-to-one addresses (GlobalIngressIPs) belong to no gateway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.ipam import conditions as c
from magw.ipam.ingress import wanted_ingress_ips
from magw.ipam.pool import Exhausted, Pool
from magw.ipam.precedence import Precedence, resolve_egress
from magw.model.globalnet import (
    CLUSTER_GLOBAL_EGRESS_DEFAULT_IPS,
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    MAX_IPS,
    MIN_IPS,
    ClusterGlobalEgressIP,
    GatewayAddresses,
    GlobalEgressIP,
    GlobalIngressIP,
    GlobalIPStatus,
    Globalnet,
    GlobalnetCondition,
    ObjectRef,
)
from magw.model.selector import LabelSelector

TEMPLATE = "cluster-egress.submariner.io"
_GATEWAY_SUFFIX = "-" + TEMPLATE


def gateway_egress_name(node: str) -> str:
    """The per-gateway ClusterGlobalEgressIP of ``node`` (the seed prepends the node name)."""
    return node + _GATEWAY_SUFFIX


def gateway_of(name: str) -> str | None:
    """The node of a per-gateway ClusterGlobalEgressIP name, or None for any other name."""
    if name.endswith(_GATEWAY_SUFFIX) and len(name) > len(_GATEWAY_SUFFIX):
        return name[: -len(_GATEWAY_SUFFIX)]
    return None


@attrs.frozen
class GlobalnetPlan:
    statuses: Mapping[ObjectRef, GlobalIPStatus]
    cluster_egress_ips: tuple[ClusterGlobalEgressIP, ...]
    ingress_ips: tuple[GlobalIngressIP, ...]
    precedence: Precedence
    pool_used: int
    pool_size: int
    waiting: tuple[ObjectRef, ...]


@attrs.define
class _Block:
    """Addresses one owner (object, gateway node or "") wants: recorded ones, or a request to allocate."""

    ref: ObjectRef
    node: str
    count: int
    recorded: tuple[IPv4Address, ...] = ()
    gone_since: str = ""
    ips: tuple[IPv4Address, ...] = ()
    error: str = ""
    reserve_failed: bool = False


@attrs.define
class _PlanEntry:
    """One live object being planned."""

    ref: ObjectRef
    previous: GlobalIPStatus | None
    blocks: list[_Block] = attrs.Factory(list)
    extra: list[GlobalnetCondition] = attrs.Factory(list)  # Updated / Overridden conditions
    fixed: GlobalnetCondition | None = None  # an Allocated condition decided before allocation (bad input)
    notes: list[str] = attrs.Factory(list)
    pod_selector: LabelSelector | None = None


def plan_globalnet(
    *,
    global_cidrs: Sequence[IPv4Network],
    gateways: Sequence[str],
    globalnet: Globalnet,
    now: datetime,
    grace: timedelta,
    allocation_blocked: bool = False,
) -> GlobalnetPlan:
    """See the module docstring."""
    gateway_set = sorted(set(gateways))
    entries: list[_PlanEntry] = []
    per_gateway = _cluster_egress(globalnet, gateway_set, now, grace, entries)
    ingress = wanted_ingress_ips(globalnet)
    effective_egress = _egress(globalnet, gateway_set, now, grace, entries)
    for obj in ingress:
        ref = ObjectRef(GLOBAL_INGRESS_IP, obj.namespace, obj.name)
        prev = globalnet.status_of(ref)
        entry = _PlanEntry(ref=ref, previous=prev)
        entry.blocks.append(_Block(ref=ref, node="", count=1, recorded=prev.allocated_ips if prev else ()))
        entries.append(entry)
    entries.sort(key=lambda e: e.ref)

    pool = Pool(global_cidrs)
    for entry in entries:  # 1. reserve what statuses record, before anything is allocated
        for block in entry.blocks:
            if not block.recorded:
                continue
            if len(block.recorded) != block.count:
                entry.notes.append(f"numberOfIPs changed: {len(block.recorded)} -> {block.count}, allocated anew")
                continue
            err = pool.reserve((block.ref, block.node), block.recorded)
            if err is None:
                block.ips = block.recorded
            else:
                block.reserve_failed = True
                entry.notes.append(f"recorded addresses not reserved ({err}), allocated anew")
    waiting: list[ObjectRef] = []
    for entry in entries:  # 2. allocate what is missing
        for block in entry.blocks:
            if block.ips or block.count == 0:
                continue
            if allocation_blocked:
                waiting.append(entry.ref)
                continue
            got = pool.allocate((block.ref, block.node), block.count)
            if isinstance(got, Exhausted):
                block.error = f"{block.node + ': ' if block.node else ''}{got}"
            else:
                block.ips = got

    precedence = resolve_egress(attrs.evolve(globalnet, egress_ips=effective_egress), ingress)
    statuses: dict[ObjectRef, GlobalIPStatus] = {}
    waiting_set = set(waiting)
    for entry in entries:
        if entry.ref in waiting_set:
            if entry.previous is not None:
                statuses[entry.ref] = entry.previous  # unchanged until every status can be read again
            continue
        statuses[entry.ref] = _status(entry, precedence, now)
    return GlobalnetPlan(
        statuses=statuses,
        cluster_egress_ips=per_gateway,
        ingress_ips=ingress,
        precedence=precedence,
        pool_used=pool.used,
        pool_size=pool.size,
        waiting=tuple(sorted(waiting_set)),
    )


def _count_problem(n: int) -> tuple[str, str] | None:
    if n < MIN_IPS or n > MAX_IPS:
        return c.INVALID_INPUT, f"numberOfIPs {n} is out of range {MIN_IPS}..{MAX_IPS}"
    if n == 0:
        return c.ZERO_INPUT, "numberOfIPs is 0: no addresses allocated"
    return None


def _gateway_blocks(
    ref: ObjectRef,
    previous: GlobalIPStatus | None,
    gateways: list[str],
    count: int,
    now: datetime,
    grace: timedelta,
) -> list[_Block]:
    """One block per current gateway, plus the blocks of gone gateways still within their grace period."""
    recorded = {g.node: g for g in previous.gateways} if previous is not None else {}
    blocks = []
    for node in sorted(set(gateways) | set(recorded)):
        old = recorded.get(node)
        if node in gateways:
            blocks.append(_Block(ref=ref, node=node, count=count, recorded=old.ips if old else ()))
            continue
        assert old is not None
        since = c.parse_time(old.gone_since) if old.gone_since else now
        if since is not None and now - since < grace:
            gone = old.gone_since or c.rfc3339(now)
            blocks.append(_Block(ref=ref, node=node, count=len(old.ips), recorded=old.ips, gone_since=gone))
    return blocks


def _cluster_egress(
    globalnet: Globalnet, gateways: list[str], now: datetime, grace: timedelta, entries: list[_PlanEntry]
) -> tuple[ClusterGlobalEgressIP, ...]:
    """Entries for every ClusterGlobalEgressIP, and the per-gateway objects that must exist."""
    count = CLUSTER_GLOBAL_EGRESS_DEFAULT_IPS
    ours: dict[str, ClusterGlobalEgressIP] = {}
    for obj in globalnet.cluster_egress_ips:
        ref = ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", obj.name)
        entry = _PlanEntry(ref=ref, previous=globalnet.status_of(ref))
        node = gateway_of(obj.name)
        if node is not None:
            ours[node] = obj
            continue
        if obj.name == TEMPLATE:
            problem = _count_problem(obj.number_of_ips)
            if problem is None:
                count = obj.number_of_ips
                message = f"the template of the per-gateway objects ({count} addresses per gateway)"
                entry.fixed = c.allocated(entry.previous, True, c.SUCCESS, message, now)
            else:
                ok = problem[0] == c.ZERO_INPUT
                count = 0 if ok else CLUSTER_GLOBAL_EGRESS_DEFAULT_IPS
                message = problem[1] + ("" if ok else f"; the gateways use the default {count}")
                entry.fixed = c.allocated(entry.previous, ok, problem[0], message, now)
        else:
            message = f"only {TEMPLATE} (and the per-gateway objects the controller makes) are honoured"
            entry.fixed = c.allocated(entry.previous, False, c.INVALID_INSTANCE, message, now)
        entries.append(entry)
    wanted: list[ClusterGlobalEgressIP] = []
    for node in sorted(set(gateways) | set(ours)):
        name = gateway_egress_name(node)
        ref = ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", name)
        prev = globalnet.status_of(ref)
        if node not in gateways and prev is None:
            continue  # an object of a gone gateway that never got addresses: nothing to keep
        entry = _PlanEntry(ref=ref, previous=prev)
        entry.blocks = [b for b in _gateway_blocks(ref, prev, gateways, count, now, grace) if b.node == node]
        if not entry.blocks:
            continue  # its gateway is gone and the grace period is over: the object goes
        wanted.append(ClusterGlobalEgressIP(name=name, number_of_ips=count))
        entries.append(entry)
    return tuple(wanted)


def _egress(
    globalnet: Globalnet, gateways: list[str], now: datetime, grace: timedelta, entries: list[_PlanEntry]
) -> tuple[GlobalEgressIP, ...]:
    """Entries for the GlobalEgressIPs; returns them with the selector they are held to (the recorded one)."""
    effective = []
    for obj in globalnet.egress_ips:
        ref = ObjectRef(GLOBAL_EGRESS_IP, obj.namespace, obj.name)
        prev = globalnet.status_of(ref)
        entry = _PlanEntry(ref=ref, previous=prev)
        entries.append(entry)
        held = prev is not None and bool(prev.allocated_ips)
        selector = obj.pod_selector
        if held and prev is not None and (obj.pod_selector_error or prev.pod_selector != obj.pod_selector):
            selector = prev.pod_selector  # the selector cannot change: keep the one the addresses were made for
            why = obj.pod_selector_error or "the podSelector cannot be changed; delete and re-create the object"
            entry.extra.append(c.selector_not_updated(prev, why, now))
        elif obj.pod_selector_error:
            entry.fixed = c.allocated(prev, False, c.INVALID_INPUT, obj.pod_selector_error, now)
            continue
        entry.pod_selector = selector
        problem = _count_problem(obj.number_of_ips)
        if problem is not None:
            entry.fixed = c.allocated(prev, problem[0] == c.ZERO_INPUT, problem[0], problem[1], now)
            continue
        if not gateways and not (prev and prev.gateways):
            entry.fixed = c.allocated(prev, False, c.NO_GATEWAY, "no gateway node: addresses are per gateway", now)
            continue
        entry.blocks = _gateway_blocks(ref, prev, gateways, obj.number_of_ips, now, grace)
        effective.append(attrs.evolve(obj, pod_selector=selector))
    return tuple(effective)


def _status(entry: _PlanEntry, precedence: Precedence, now: datetime) -> GlobalIPStatus:
    prev = entry.previous
    held = [b for b in entry.blocks if b.ips]
    errors = [b.error for b in entry.blocks if b.error]
    if entry.fixed is not None:
        allocated = entry.fixed
    elif errors:
        failed_reserve = any(b.reserve_failed for b in entry.blocks if b.error)
        reason = c.RESERVE_FAILED if failed_reserve else c.POOL_EXHAUSTED
        allocated = c.allocated(prev, False, reason, "; ".join([*entry.notes, *errors]), now)
    else:
        count = sum(len(b.ips) for b in held)
        message = "; ".join(entry.notes) if entry.notes else f"{count} address{'' if count == 1 else 'es'}"
        allocated = c.allocated(prev, True, c.SUCCESS, message, now)
    conds = [allocated, *entry.extra]
    losses = precedence.overridden.get(entry.ref, ())
    if losses:
        winners = sorted({str(w) for _, w in losses})
        pods = [f"{p.namespace}/{p.name}" for p, _ in losses]
        shown = ", ".join(pods[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
        message = f"{len(pods)} pods use {', '.join(winners)} instead (first by name wins): {shown}"
        conds.append(c.condition(prev, c.OVERRIDDEN, c.TRUE, c.OVERLAP, message, now))
    per_gateway = entry.ref.kind != GLOBAL_INGRESS_IP
    return GlobalIPStatus(
        conditions=tuple(sorted(conds, key=lambda x: x.type)),
        allocated_ips=[ip for b in held for ip in b.ips],
        gateways=[GatewayAddresses(node=b.node, ips=b.ips, gone_since=b.gone_since) for b in held if per_gateway],
        pod_selector=entry.pod_selector if entry.ref.kind == GLOBAL_EGRESS_IP else None,
    )
