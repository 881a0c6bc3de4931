"""The two steps of a sync around its apply that touch every operation: run in the reconciler's worker thread.

``prepare`` diffs the desired state against the observed (or known) one, holds back prunes while the
inputs are not synced, and leaves out what waits for its retry time. ``record`` books the apply's
result in the retry book, carries the applied operations out on the observed state (the next known
state, ``magw.reconcile.known``) and records the metrics. Only one sync runs at a time, so the loop
never reads the retry book or the metrics while a step runs (``magw.reconcile.loop``).
"""

from __future__ import annotations

import time

import attrs

from magw.desired.state import DesiredState
from magw.reconcile.changeset import NftChange, Op
from magw.reconcile.driver import ApplyResult
from magw.reconcile.known import after_apply, needs_observe
from magw.reconcile.metrics import ReconcilerMetrics
from magw.reconcile.prunes import Differ, changes_to_apply
from magw.reconcile.retry import Filtered, RetryBook


@attrs.define
class SyncSteps:
    differ: Differ
    retry: RetryBook
    metrics: ReconcilerMetrics

    def prepare(
        self, desired: DesiredState, observed: DesiredState, *, prune: bool, now: float
    ) -> tuple[Filtered, tuple[Op | NftChange, ...]]:
        """Diff, hold back prunes while the inputs are not synced, leave out what waits for its retry."""
        changes, deferred = changes_to_apply(self.differ, desired, observed, prune=prune)
        return self.retry.filter(changes, now), deferred

    def record(
        self,
        desired: DesiredState,
        observed: DesiredState,
        result: ApplyResult,
        *,
        now: float,
        full: bool,
        started: float,
        skipped: tuple[Op | NftChange, ...],
        deferred: tuple[Op | NftChange, ...],
    ) -> tuple[DesiredState, bool, float]:
        """Retries, known state and metrics after an apply; (known state, observe again?, seconds taken)."""
        self.retry.record(result.applied, result.failed, now)
        # What was applied, carried out; every kind that settled holds the planner's own tuple (known.py).
        known = after_apply(observed, desired, result.applied, (*skipped, *deferred, *(f.op for f in result.failed)))
        took = time.perf_counter() - started
        self.metrics.record_sync(known, result, full=full, seconds=took, skipped=len(skipped), deferred=len(deferred))
        return known, needs_observe(result.applied), took
