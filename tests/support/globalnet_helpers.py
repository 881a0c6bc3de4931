"""Helpers of the Globalnet IPAM tests: feed a plan its own output as the controller does, and the invariants."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.ipam.globalnet import GlobalnetPlan, gateway_of, plan_globalnet
from magw.model.globalnet import (
    ALLOCATED,
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    GlobalIPStatus,
    Globalnet,
    ObjectRef,
)

CIDR = IPv4Network("242.1.0.0/24")
T0 = datetime(2026, 11, 23, 5, 0, 0, tzinfo=UTC)
GRACE = timedelta(seconds=300)


def write_back(gn: Globalnet, plan: GlobalnetPlan) -> Globalnet:
    """What the broker holds after the controller wrote ``plan``: its statuses and controller-made objects."""
    user_cgeips = [o for o in gn.cluster_egress_ips if gateway_of(o.name) is None]
    return attrs.evolve(
        gn,
        cluster_egress_ips=[*user_cgeips, *plan.cluster_egress_ips],
        ingress_ips=plan.ingress_ips,
        statuses=dict(plan.statuses),
    )


def converge(
    gn: Globalnet,
    gateways: Sequence[str] = ("gw1",),
    now: datetime = T0,
    cidrs: Sequence[IPv4Network] = (CIDR,),
    blocked: bool = False,
) -> tuple[Globalnet, GlobalnetPlan]:
    """Plan and write back until the plan is a fixpoint (at most 4 rounds)."""
    for _ in range(4):
        plan = plan_globalnet(
            global_cidrs=cidrs, gateways=gateways, globalnet=gn, now=now, grace=GRACE, allocation_blocked=blocked
        )
        after = write_back(gn, plan)
        if after == gn:
            return gn, plan
        gn = after
    raise AssertionError("the plan did not reach a fixpoint in 4 rounds")


def live_refs(gn: Globalnet) -> set[ObjectRef]:
    refs = {ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", o.name) for o in gn.cluster_egress_ips}
    refs |= {ObjectRef(GLOBAL_EGRESS_IP, o.namespace, o.name) for o in gn.egress_ips}
    refs |= {ObjectRef(GLOBAL_INGRESS_IP, o.namespace, o.name) for o in gn.ingress_ips}
    return refs


def held(gn: Globalnet) -> dict[IPv4Address, list[ObjectRef]]:
    out: dict[IPv4Address, list[ObjectRef]] = {}
    for ref, status in gn.statuses:
        for address in status.allocated_ips:
            out.setdefault(address, []).append(ref)
    return out


def check_invariants(gn: Globalnet, cidrs: Sequence[IPv4Network] = (CIDR,)) -> None:
    """The allocation invariants on a converged broker state."""
    live = live_refs(gn)
    for address, holders in held(gn).items():
        assert len(holders) == 1, f"{address} held by {holders}"
        assert holders[0] in live, f"{address} held by deleted {holders[0]}"
        assert any(address in c for c in cidrs), f"{address} outside the global CIDR"
        assert all(address not in (c.network_address, c.broadcast_address) for c in cidrs)
    for ref, status in gn.statuses:
        assert ref in live, f"a status of deleted {ref}"
        _check_counts(gn, ref, status)


def _check_counts(gn: Globalnet, ref: ObjectRef, status: GlobalIPStatus) -> None:
    cond = status.condition(ALLOCATED)
    assert cond is not None, f"{ref}: no Allocated condition"
    if cond.status.value != "True" or cond.reason != "Success":
        return  # Error (with a reason) or ZeroInput / template: no count to check
    if ref.kind == GLOBAL_EGRESS_IP:
        obj = next(o for o in gn.egress_ips if (o.namespace, o.name) == (ref.namespace, ref.name))
        for block in status.gateways:
            if not block.gone_since:
                assert len(block.ips) == obj.number_of_ips, f"{ref}: {block.node} holds {len(block.ips)}"
    elif ref.kind == GLOBAL_INGRESS_IP:
        assert len(status.allocated_ips) == 1, f"{ref}: {status.allocated_ips}"
    elif gateway_of(ref.name) is not None:
        obj = next(o for o in gn.cluster_egress_ips if o.name == ref.name)
        if not any(b.gone_since for b in status.gateways):  # a gone gateway's block keeps its size
            assert len(status.allocated_ips) == obj.number_of_ips
