"""The egress controller: keeps every EgressVIP's status in the source, and changes bindings for the API.

A pass (``reconcile``) scans the source (a fresh read: it includes this process's own writes), computes every
VIP's status with ``ops.statuses`` (services from the binding resolver; holder and since as they are) and
writes the ones that differ; statuses of VIPs that are gone are deleted. ``run()`` repeats it every
``interval`` and whenever ``mark_dirty(reason)`` is called (the trigger loop, ``magw.reconcile.trigger``).

Operations (the HTTP API's, ``magw.daemons.egressgw.api``) run under the same lock as the passes, one at a
time, each on a fresh read: ``bind``/``unbind`` compute the new VIP with ``ops``, write it back to its file
(``EgressStore.write_vip``) and run a pass, so the answer carries the new status; ``report`` takes a holder
report (keepalived's MASTER/BACKUP/FAULT from an agent, or the seed's ``master_notify``) and writes the status
with the new holder; ``notify`` (the seed's notify-only) writes the VIP's status now. Every check happens
before the first write: a refused request writes nothing.

The source is the file broker or the Kubernetes view (``KubeEgressView``); the writes go through
``EgressWriter`` (``EgressStore``, ``KubeEgressStore``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import attrs
import structlog

from magw.controllers.egressgw import ops
from magw.model import Snapshot
from magw.model.egressgw import EgressGateway, EgressVIP, EgressVIPStatus
from magw.reconcile.retry import Backoff
from magw.reconcile.trigger import DONE, Outcome, Trigger, Wake
from magw.sources.base import StateSource

log = structlog.get_logger(__name__)


class EgressWriter(Protocol):
    def write_status(self, name: str, status: EgressVIPStatus) -> None: ...

    def delete_status(self, name: str) -> bool: ...

    def vip_file(self, name: str) -> Path: ...

    def write_vip(self, vip: EgressVIP) -> Path: ...


class NotReady(Exception):
    """No snapshot of the cluster yet (the source has no valid Cluster document of it)."""


@attrs.frozen
class EgressPassResult:
    written: int = 0
    deleted: int = 0
    conflicts: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Answer:
    """What an operation leaves: the VIP and its status as written."""

    vip: EgressVIP
    status: EgressVIPStatus


def _without(before: EgressVIPStatus, after: EgressVIPStatus) -> float | None:
    """Seconds between losing the last holder (``before.since`` with no holder) and the new holder's ``since``."""
    if before.holder or not after.holder or not before.since or not after.since:
        return None
    try:
        lost, got = datetime.fromisoformat(before.since), datetime.fromisoformat(after.since)
    except ValueError:
        return None
    return max((got - lost).total_seconds(), 0.0)


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EgressController:
    def __init__(
        self,
        *,
        source: StateSource,
        store: EgressWriter,
        clock: Callable[[], float] = time.time,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.source = source
        self.store = store
        self.cluster = source.local_cluster
        self._clock = clock
        self._may_write = may_write
        # told of each change of a VIP's recorded holder: (vip, old holder, new holder, seconds the VIP had no
        # holder before the new one, None when it had one or the time is unknown) (the metrics)
        self.on_holder: Callable[[str, str, str, float | None], None] | None = None
        self.lock = asyncio.Lock()
        self._trigger: Trigger | None = None  # while run() runs
        self._conflicts: tuple[str, ...] = ()

    # ----- reading --------------------------------------------------------------------------------

    def fresh(self) -> Snapshot:
        self.source.scan()
        snapshot = self.source.snapshot
        if snapshot is None:
            raise NotReady(f"no snapshot of cluster {self.cluster} yet")
        return snapshot

    def _check_lease(self) -> None:
        if not self._may_write():
            raise NotReady("this replica does not hold the lease")

    # ----- passes ---------------------------------------------------------------------------------

    def reconcile(self) -> EgressPassResult:
        """One pass; synchronous (the caller holds ``lock`` when operations may run concurrently)."""
        try:
            snapshot = self.fresh()
        except NotReady:
            return EgressPassResult()
        return self._write_statuses(snapshot.egressgw, snapshot)

    def _write_statuses(self, egress: EgressGateway, snapshot: Snapshot) -> EgressPassResult:
        wanted, conflicts = ops.statuses(egress, snapshot.globalnet)
        if conflicts != self._conflicts:
            for line in conflicts:
                log.warning("egress.binding_conflict", conflict=line)
            self._conflicts = conflicts
        written = deleted = 0
        for name, status in sorted(wanted.items()):
            if egress.status_of(name) != status:
                self._check_lease()
                self.store.write_status(name, status)
                written += 1
                log.info("egress.status_written", vip=name, holder=status.holder, services=list(status.services))
        for name, _ in egress.statuses:
            if name not in wanted:
                self._check_lease()
                self.store.delete_status(name)
                deleted += 1
                log.info("egress.status_deleted", vip=name)
        return EgressPassResult(written=written, deleted=deleted, conflicts=conflicts)

    def mark_dirty(self, reason: str) -> None:
        """Run a pass soon; ``reason`` says why (an API change, a new snapshot). Before ``run()``: nothing (its
        first pass comes at once)."""
        if self._trigger is not None:
            self._trigger.mark_dirty(reason)

    async def run(self, interval: float = 1.0) -> None:
        """Passes every ``interval`` seconds and on ``mark_dirty()``, until cancelled; an I/O error (or no lease)
        is logged (``egress.pass_failed``) and the pass retried at the next tick."""
        self._trigger = Trigger(
            "egress",
            self._pass,
            resync=interval,
            backoff=Backoff.constant(interval),
            retry_on=(OSError, NotReady),
            failed_event="egress.pass_failed",
        )
        try:
            await self._trigger.run(asyncio.Event())
        finally:
            self._trigger = None

    async def _pass(self, _wake: Wake) -> Outcome:
        async with self.lock:
            self.reconcile()
        return DONE

    # ----- operations (call with ``lock`` held) --------------------------------------------------

    def _answer(self, name: str) -> Answer:
        snapshot = self.fresh()
        vip = snapshot.egressgw.vip(name)
        if vip is None:  # the VIP's document went away between the write and the read: say so
            raise ops.EgressOpError(ops.ErrorKind.NOT_FOUND, f"no EgressVIP named {name!r}")
        return Answer(vip=vip, status=snapshot.egressgw.status_of(name) or EgressVIPStatus())

    def change_binding(self, action: str, vip_ref: str, namespace: str, service: str = "") -> Answer:
        """``action`` ``bind`` or ``unbind``: the new VIP is written to its file, then the statuses."""
        snapshot = self.fresh()
        egress = snapshot.egressgw
        if action == "bind":
            changed = ops.bind(egress, snapshot.globalnet, vip_ref, namespace, service)
        elif action == "unbind":
            changed = ops.unbind(egress, vip_ref, namespace, service)
        else:
            raise ops.EgressOpError(ops.ErrorKind.INVALID, f"action: {action!r} is not bind, unbind or notify")
        name = ops.find_vip(egress, vip_ref).name
        vip = changed.vip(name)
        assert vip is not None
        self.store.vip_file(name)  # raises StoreRefused before anything is written
        self._check_lease()
        path = self.store.write_vip(vip)
        log.info(
            "egress.binding_changed", action=action, vip=name, namespace=namespace, service=service, file=path.name
        )
        snapshot = self.fresh()
        self._write_statuses(snapshot.egressgw, snapshot)
        return self._answer(name)

    def notify(self, vip_ref: str) -> Answer:
        """The seed's notify-only: the VIP's status (its services) written now."""
        snapshot = self.fresh()
        name = ops.find_vip(snapshot.egressgw, vip_ref).name
        self._write_statuses(snapshot.egressgw, snapshot)
        return self._answer(name)

    def report(self, report: ops.HolderReport) -> Answer:
        """A holder report: the VIP's status with the new holder (and ``since`` = now when it changed)."""
        snapshot = self.fresh()
        egress = snapshot.egressgw
        ops.check_report(egress, report)
        name = ops.find_vip(egress, report.vip).name
        stamped = attrs.evolve(report, vip=name, at=report.at or rfc3339(self._clock()))
        current = egress.status_of(name) or EgressVIPStatus()
        after = ops.apply_report(current, stamped)
        if after != current:
            statuses = [(n, s) for n, s in egress.statuses if n != name]
            egress = attrs.evolve(egress, statuses=[*statuses, (name, attrs.evolve(after, services=()))])
            log.info("egress.holder", vip=name, node=report.node, state=report.state.value, holder=after.holder)
            if after.holder != current.holder and self.on_holder is not None:
                self.on_holder(name, current.holder, after.holder, _without(current, after))
        wanted, _ = ops.statuses(egress, snapshot.globalnet)
        status = wanted[name]
        if snapshot.egressgw.status_of(name) != status:
            self._check_lease()
            self.store.write_status(name, status)
        return self._answer(name)
