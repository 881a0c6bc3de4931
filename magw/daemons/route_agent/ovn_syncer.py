"""The OVN network plugin syncer: keeps magw's rows in the OVN Northbound database equal to the plan.

It follows a state source (the file broker or Kubernetes) and, when hosted by a route agent
(``magw-route-agent --ovn-nb ... --ovn-sb ...``), that agent's data-plane health monitor: a gateway the
probes take down leaves every reroute policy's ECMP set in the next sync, one NB transaction, with no
broker round trip. Each sync (``magw.reconcile.ovnsync.sync_ovn``) runs in a worker thread, because the
OVSDB IDL calls block; a failed sync is logged once per distinct error and retried with a capped backoff
(``OVN_SYNC_BACKOFF``: 0.5 s doubling to 10 s); a resync every ``resync_period`` repairs rows changed or
deleted behind our back. When to sync is the trigger loop's (``magw.reconcile.trigger``).

A sync that a change asked for (a new snapshot, a health change) starts from what the last successful sync
left in the NB (``known``) instead of reading every row of ours back: a failover is plan, diff and one
transaction. The periodic resync, the first sync and every sync after a failure read the NB and the SB.

One syncer per cluster: it is the only writer of our rows (docs/ovn.md).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import attrs
import structlog

from magw.daemons.common.runner import write_json_atomic
from magw.model import Snapshot
from magw.reconcile.ovnsync import OvnDriver, OvnSettings, OvnSyncResult, sync_ovn
from magw.reconcile.retry import OVN_SYNC_BACKOFF
from magw.reconcile.trigger import DONE, FAILED, Outcome, Trigger, Wake
from magw.sources.base import StateSource

log = structlog.get_logger(__name__)


@attrs.define
class OvnSyncer:
    source: StateSource
    driver: OvnDriver
    planning: Callable[[Snapshot], Snapshot] = lambda s: s  # the health monitor's merge, when hosted by an agent
    settings: OvnSettings = attrs.field(factory=OvnSettings)
    resync_period: float = 30.0
    status_file: str | None = None
    syncs: int = attrs.field(init=False, default=0)
    last: OvnSyncResult | None = attrs.field(init=False, default=None)
    _trigger: Trigger = attrs.field(init=False)
    _last_error: str | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self._trigger = Trigger("ovn_syncer", self._pass, resync=self.resync_period, backoff=OVN_SYNC_BACKOFF)
        self.source.subscribe(lambda _snapshot: self.mark_dirty("snapshot"))

    def mark_dirty(self, reason: str) -> None:
        """Sync soon; ``reason`` says why (a new snapshot, or a health change)."""
        self._trigger.mark_dirty(reason)

    def _snapshot(self) -> Snapshot | None:
        snapshot = self.source.snapshot
        if not self.source.initial_sync_done or snapshot is None:
            return None
        return self.planning(snapshot)

    async def sync(self, *, full: bool = True) -> OvnSyncResult | None:
        """One sync now (None while the source has no snapshot yet); ``full=False`` starts from the last
        successful sync's rows when there is one."""
        snapshot = self._snapshot()
        if snapshot is None:
            return None
        last = self.last if not full and self.last is not None and self.last.ok else None
        known = None if last is None else last.known
        chassis = None if last is None else last.chassis
        result = await asyncio.to_thread(
            functools.partial(sync_ovn, self.driver, snapshot, self.settings, known=known, chassis=chassis)
        )
        self.syncs += 1
        self.last = result
        self._report(result)
        return result

    def _report(self, result: OvnSyncResult) -> None:
        if result.error is not None:
            if result.error != self._last_error:
                log.error("ovn_syncer.sync_failed", error=result.error)
            self._last_error = result.error
        else:
            if self._last_error is not None:
                log.info("ovn_syncer.recovered", previous_error=self._last_error)
            self._last_error = None
            if result.changes is not None and not result.changes.empty:
                log.info(
                    "ovn_syncer.synced",
                    changes=result.changes.summary(),
                    slots=dict(result.slots),
                    policies={m: list(h) for m, h in result.nexthops.items()},
                    took_ms=round(result.took_ms, 1),
                    full=result.observed,
                )
        if self.status_file is not None:
            try:
                write_json_atomic(self.status_file, self.status_json())
            except OSError as exc:
                log.error("ovn_syncer.status_file_failed", path=self.status_file, error=str(exc))

    def status_json(self) -> dict[str, Any]:
        return {
            "cluster": self.source.local_cluster,
            "syncs": self.syncs,
            "last_sync": self.last.as_json() if self.last is not None else None,
            "updated_at": datetime.now(UTC).isoformat(),
        }

    async def run(self, stop: asyncio.Event) -> None:
        """Sync at start, on every change, on every resync period, and after a failure with a capped backoff,
        until ``stop`` is set."""
        await self._trigger.run(stop)

    async def _pass(self, wake: Wake) -> Outcome:
        """A change asked for it: from the known rows; the period or a retry: a full sync (it reads the NB)."""
        result = await self.sync(full=not wake.marked)
        return FAILED if result is not None and not result.ok else DONE
