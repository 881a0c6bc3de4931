"""One OVN sync, pure apart from the driver it is given: observe -> plan -> diff -> one transaction.

``sync_ovn(driver, snapshot, settings)`` reads our rows and the SB chassis through the driver, plans the
local cluster (``magw.desired.ovn.planner``), diffs, and when anything differs hands the whole change set to
``driver.apply`` (one NB transaction; the driver checks the plan's foreign needs first, so bad input writes
nothing). Every failure ends as ``OvnSyncResult.error``, one line, for the log and the status.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from magw.desired.ovn.planner import OvnInputs, OvnPlan, OvnPlanError, plan_ovn
from magw.desired.ovn.rows import OvnState
from magw.desired.ovn.slots import observed_slots
from magw.desired.ovn.topology import CLUSTER_ROUTER, LB_GROUP
from magw.model import Snapshot
from magw.reconcile.ovndiff import OvnChangeSet, ovn_diff


class OvnDriver(Protocol):
    """What a sync needs of an OVN driver (``magw.drivers.ovn``, or its fake)."""

    def observe(self) -> OvnState: ...

    def chassis_by_hostname(self) -> dict[str, str]: ...

    def apply(self, changes: OvnChangeSet, plan: OvnPlan) -> Any: ...


@attrs.frozen(kw_only=True)
class OvnSettings:
    cluster_router: str = CLUSTER_ROUTER
    lb_group: str | None = LB_GROUP


@attrs.frozen(kw_only=True)
class OvnSyncResult:
    """What one sync did. ``error``: why nothing was written (None when it succeeded)."""

    changes: OvnChangeSet | None = None
    slots: Mapping[str, int] = attrs.field(factory=dict)
    nexthops: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)  # policy match -> its ECMP set
    error: str | None = None
    took_ms: float = 0.0
    # What the NB holds of ours after this sync (the plan when it was applied), and the chassis it planned
    # with: the next sync may start from them instead of reading the NB again (``known``). None after a failure.
    known: OvnState | None = None
    chassis: Mapping[str, str] | None = None
    observed: bool = True  # this sync read the NB (a full sync) rather than starting from ``known``

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "error": self.error,
            "changes": self.changes.summary() if self.changes is not None else None,
            "slots": dict(sorted(self.slots.items())),
            "policies": {m: list(h) for m, h in sorted(self.nexthops.items())},
            "took_ms": round(self.took_ms, 1),
            "observed": self.observed,
        }


def sync_ovn(
    driver: OvnDriver,
    snapshot: Snapshot,
    settings: OvnSettings | None = None,
    *,
    known: OvnState | None = None,
    chassis: Mapping[str, str] | None = None,
) -> OvnSyncResult:
    """One level-driven sync of the NB toward the plan of ``snapshot``.

    With ``known`` and ``chassis`` (a previous result's) it skips reading the NB and the SB: a failover's sync
    (a gateway leaving the ECMP sets) is then plan, diff and one transaction. Rows changed behind our back are
    not seen until a full sync; the driver's checks before writing refuse a transaction whose rows went away,
    and such an error drops ``known`` so the next sync reads everything again.
    """
    settings = settings or OvnSettings()
    start = time.monotonic()
    full = known is None or chassis is None
    try:
        observed = driver.observe() if known is None or chassis is None else known
        by_host = driver.chassis_by_hostname() if known is None or chassis is None else dict(chassis)
        inputs = OvnInputs(
            chassis=by_host,
            previous_slots=observed_slots(observed.routers),
            cluster_router=settings.cluster_router,
            lb_group=settings.lb_group,
        )
        plan = plan_ovn(snapshot, inputs)
        changes = ovn_diff(plan.state, observed)
        if not changes.empty:
            driver.apply(changes, plan)
    except OvnPlanError as exc:
        return OvnSyncResult(error=str(exc), took_ms=(time.monotonic() - start) * 1000, observed=full)
    except Exception as exc:  # the driver's input and connection errors: reported, retried by the daemon
        err = f"{type(exc).__name__}: {exc}"
        return OvnSyncResult(error=err, took_ms=(time.monotonic() - start) * 1000, observed=full)
    return OvnSyncResult(
        changes=changes,
        slots=plan.slots,
        nexthops={p.match: p.nexthops for p in plan.state.policies},
        took_ms=(time.monotonic() - start) * 1000,
        known=plan.state,
        chassis=by_host,
        observed=full,
    )
