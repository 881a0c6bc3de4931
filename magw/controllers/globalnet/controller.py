"""The Globalnet controller's pass: read the source, plan, write what differs (docs/globalnet.md).

One pass (``GlobalnetController.reconcile``), synchronous, run off the event loop by the daemon:

1. scan the source (``FileBroker.scan`` of the broker directory, or the Kubernetes source's): the read is
   fresh, it includes every write of the previous pass;
2. overlay what this process wrote and the source does not show yet (``_Overlay``): an object seen again
   before its own status is visible is not allocated twice (Submariner #4122);
3. ``plan_globalnet`` with ``allocation_blocked`` while a status file of the cluster cannot be read: the
   controller never allocates past a status it could not read, and never re-allocates its object
   (Submariner #3336);
4. write the statuses that differ, then the controller-made objects; delete what the plan dropped
   (statuses first, then objects). Each write is atomic (``GlobalnetStore``). An I/O error ends the pass;
   the daemon retries it with backoff, and the next pass starts again from what the source holds.

Nothing here is fatal after the lease is won (Submariner #3337): errors are logged and retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Network
from typing import Protocol

import attrs
import structlog

from magw.ipam.globalnet import GlobalnetPlan, gateway_of, plan_globalnet
from magw.model import Snapshot
from magw.model.globalnet import (
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    ClusterGlobalEgressIP,
    GlobalIngressIP,
    GlobalIPStatus,
    Globalnet,
    ObjectRef,
)
from magw.sources.base import StateSource
from magw.sources.file.globalnet_store import status_prefix

log = structlog.get_logger(__name__)

Made = ClusterGlobalEgressIP | GlobalIngressIP


def _made_ref(obj: Made) -> ObjectRef:
    if isinstance(obj, GlobalIngressIP):
        return ObjectRef(GLOBAL_INGRESS_IP, obj.namespace, obj.name)
    return ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", obj.name)


@attrs.define
class _Overlay:
    """What this process wrote (None: deleted) until a read of the source shows the same."""

    statuses: dict[ObjectRef, GlobalIPStatus | None] = attrs.Factory(dict)
    objects: dict[ObjectRef, Made | None] = attrs.Factory(dict)

    def apply(self, gn: Globalnet) -> Globalnet:
        statuses = dict(gn.statuses)
        for ref, want in list(self.statuses.items()):
            if statuses.get(ref) == want:
                del self.statuses[ref]  # visible now
            elif want is None:
                statuses.pop(ref, None)
            else:
                statuses[ref] = want
        made: dict[ObjectRef, Made] = {_made_ref(o): o for o in _made(gn.ingress_ips, gn.cluster_egress_ips)}
        for ref, obj in list(self.objects.items()):
            if made.get(ref) == obj:
                del self.objects[ref]
            elif obj is None:
                made.pop(ref, None)
            else:
                made[ref] = obj
        return attrs.evolve(
            gn,
            statuses=statuses,
            ingress_ips=[o for o in made.values() if isinstance(o, GlobalIngressIP)],
            cluster_egress_ips=[o for o in made.values() if isinstance(o, ClusterGlobalEgressIP)],
        )


@attrs.frozen
class GlobalnetPassResult:
    """What one pass did (the daemon logs it; tests read it)."""

    planned: bool
    written: int = 0
    allocated: int = 0  # addresses in written statuses that their previous status did not hold
    deleted: int = 0
    waiting: int = 0
    pool_used: int = 0
    pool_size: int = 0
    plan: GlobalnetPlan | None = None
    cidrs: tuple[IPv4Network, ...] = ()  # the cluster's global CIDRs (the pool)


class GlobalnetController:
    def __init__(
        self,
        *,
        source: StateSource,
        store: GlobalnetWriter,
        grace: timedelta,
        clock: Callable[[], float] = time.time,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.source = source
        self.store = store
        self.cluster = source.local_cluster
        self.grace = grace
        self._clock = clock
        self._may_write = may_write  # the daemon's lease check, asked before every write
        self._overlay = _Overlay()
        self._idle_logged = ""

    def reconcile(self) -> GlobalnetPassResult:
        self.source.scan()
        snapshot = self.source.snapshot
        if snapshot is None:
            return self._idle("no snapshot of the cluster yet")
        cidrs = snapshot.cluster(self.cluster).global_cidrs
        if not cidrs:
            return self._idle("the cluster has no global CIDRs: Globalnet is off")
        self._idle_logged = ""
        return self._pass(snapshot)

    def _idle(self, why: str) -> GlobalnetPassResult:
        if why != self._idle_logged:
            log.info("globalnet.idle", cluster=self.cluster, reason=why)
            self._idle_logged = why
        return GlobalnetPassResult(planned=False)

    def _pass(self, snapshot: Snapshot) -> GlobalnetPassResult:
        gn = self._overlay.apply(snapshot.globalnet)
        unreadable = self.source.problem_files(status_prefix(self.cluster))
        now = datetime.fromtimestamp(self._clock(), tz=UTC)
        plan = plan_globalnet(
            global_cidrs=snapshot.cluster(self.cluster).global_cidrs,
            gateways=[n.name for n in snapshot.nodes if n.gateway],
            globalnet=gn,
            now=now,
            grace=self.grace,
            allocation_blocked=bool(unreadable),
        )
        if plan.waiting:
            log.warning(
                "globalnet.waiting_unreadable",
                cluster=self.cluster,
                files=sorted(unreadable),
                waiting=len(plan.waiting),
            )
        written, deleted, allocated = self._write(gn, plan)
        return GlobalnetPassResult(
            planned=True,
            written=written,
            deleted=deleted,
            allocated=allocated,
            waiting=len(plan.waiting),
            pool_used=plan.pool_used,
            pool_size=plan.pool_size,
            plan=plan,
            cidrs=tuple(snapshot.cluster(self.cluster).global_cidrs),
        )

    def _check_lease(self) -> None:
        if not self._may_write():
            raise LeaseLost("the lease is no longer held: stopping writes")

    def _write(self, gn: Globalnet, plan: GlobalnetPlan) -> tuple[int, int, int]:
        written = deleted = allocated = 0
        current: dict[ObjectRef, GlobalIPStatus] = dict(gn.statuses)
        for ref, status in sorted(plan.statuses.items()):
            if current.get(ref) == status:
                continue
            self._check_lease()
            self.store.write_status(ref, status)
            self._overlay.statuses[ref] = status
            written += 1
            old = current.get(ref)
            allocated += len(set(status.allocated_ips) - set(old.allocated_ips if old else ()))
            log.info(
                "globalnet.status_written",
                object=str(ref),
                addresses=[str(a) for a in status.allocated_ips],
                before=[str(a) for a in old.allocated_ips] if old else [],
                allocated=_reason(status),
            )
        made_now = {_made_ref(o): o for o in _made(gn.ingress_ips, gn.cluster_egress_ips) if _ours(o)}
        made_want = {_made_ref(o): o for o in _made(plan.ingress_ips, plan.cluster_egress_ips)}
        for ref, obj in sorted(made_want.items()):
            if made_now.get(ref) != obj:
                self._check_lease()
                self.store.write_object(obj)
                self._overlay.objects[ref] = obj
                written += 1
                log.info("globalnet.object_written", object=str(ref))
        for ref in sorted(set(current) - set(plan.statuses)):
            self._check_lease()
            self.store.delete_status(ref)
            self._overlay.statuses[ref] = None
            deleted += 1
            log.info("globalnet.released", object=str(ref), addresses=[str(a) for a in current[ref].allocated_ips])
        for ref in sorted(set(made_now) - set(made_want)):
            self._check_lease()
            self.store.delete_object(ref)
            self._overlay.objects[ref] = None
            deleted += 1
            log.info("globalnet.object_deleted", object=str(ref))
        return written, deleted, allocated


def _made(ingress: tuple[GlobalIngressIP, ...], egress: tuple[ClusterGlobalEgressIP, ...]) -> list[Made]:
    return [*ingress, *egress]


def _ours(obj: Made) -> bool:
    return isinstance(obj, GlobalIngressIP) or gateway_of(obj.name) is not None


def _reason(status: GlobalIPStatus) -> str:
    cond = status.condition("Allocated")
    return f"{cond.status.value}/{cond.reason}" if cond is not None else "-"


class GlobalnetWriter(Protocol):
    """Where a pass writes: ``GlobalnetStore`` (file broker) or ``KubeGlobalnetStore`` (status subresources)."""

    def write_status(self, ref: ObjectRef, status: GlobalIPStatus) -> None: ...

    def delete_status(self, ref: ObjectRef) -> bool: ...

    def write_object(self, obj: ClusterGlobalEgressIP | GlobalIngressIP) -> None: ...

    def delete_object(self, ref: ObjectRef) -> bool: ...


class LeaseLost(RuntimeError):
    """Raised before a write when the daemon no longer holds the lease."""
