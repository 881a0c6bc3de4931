"""Prometheus metrics of the reconcilers.

One set of metric families per registry, shared by every reconciler registered
there; each reconciler writes its own ``reconciler=NAME`` children. With
``registry=None`` the families are created unregistered: they still count (tests
read them) but nothing exports them.
"""

from __future__ import annotations

import collections
import threading
import weakref

import attrs
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from magw.desired.state import KINDS, DesiredState
from magw.reconcile.changeset import Op
from magw.reconcile.driver import ApplyResult
from magw.reconcile.retry import object_id

OBJECT_KINDS: tuple[str, ...] = (*KINDS, "nft")

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@attrs.frozen(kw_only=True)
class _Families:
    sync_duration: Histogram
    syncs: Counter
    changes: Counter
    errors: Counter
    objects: Gauge
    skipped: Counter
    group_replaces: Counter
    group_syncs: Histogram


def _make_families(registry: CollectorRegistry | None) -> _Families:
    return _Families(
        sync_duration=Histogram(
            "magw_reconciler_sync_duration_seconds",
            "Time of one sync (plan, observe if full, diff, apply).",
            ["reconciler", "mode"],
            buckets=_BUCKETS,
            registry=registry,
        ),
        syncs=Counter("magw_reconciler_syncs", "Syncs run.", ["reconciler", "mode"], registry=registry),
        changes=Counter(
            "magw_reconciler_changes",
            "Operations applied successfully.",
            ["reconciler", "kind", "verb"],
            registry=registry,
        ),
        errors=Counter(
            "magw_reconciler_errors",
            "Failed operations by object kind; kind=sync for a sync that raised.",
            ["reconciler", "kind"],
            registry=registry,
        ),
        objects=Gauge(
            "magw_reconciler_objects",
            "Objects we own, as known after the last sync.",
            ["reconciler", "kind"],
            registry=registry,
        ),
        skipped=Counter(
            "magw_reconciler_skipped",
            "Operations left out of a sync (backoff or prune deferred).",
            ["reconciler", "reason"],
            registry=registry,
        ),
        # docs/metrics.md: a failover is a group replace; these two say how many and what each sync cost.
        group_replaces=Counter(
            "magw_nexthop_group_replaces", "Nexthop groups created or replaced in the kernel.", registry=registry
        ),
        group_syncs=Histogram(
            "magw_nexthop_group_sync_seconds",
            "Time of each sync (plan, diff, apply) that changed nexthop groups: an event's way to the kernel.",
            ["mode"],
            buckets=_BUCKETS,
            registry=registry,
        ),
    )


_lock = threading.Lock()
_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()


def _families(registry: CollectorRegistry | None) -> _Families:
    if registry is None:
        return _make_families(None)
    with _lock:
        fams = _by_registry.get(registry)
        if fams is None:
            fams = _make_families(registry)
            _by_registry[registry] = fams
        return fams


class ReconcilerMetrics:
    """The metrics of one named reconciler."""

    def __init__(self, name: str, registry: CollectorRegistry | None) -> None:
        self.name = name
        self._f = _families(registry)

    def sync(self, *, full: bool, seconds: float) -> None:
        mode = "full" if full else "partial"
        self._f.sync_duration.labels(reconciler=self.name, mode=mode).observe(seconds)
        self._f.syncs.labels(reconciler=self.name, mode=mode).inc()

    def applied(self, kind: str, verb: str, count: int = 1) -> None:
        self._f.changes.labels(reconciler=self.name, kind=kind, verb=verb).inc(count)

    def error(self, kind: str, count: int = 1) -> None:
        self._f.errors.labels(reconciler=self.name, kind=kind).inc(count)

    def skipped(self, reason: str, count: int) -> None:
        if count:
            self._f.skipped.labels(reconciler=self.name, reason=reason).inc(count)

    def owned(self, state: DesiredState) -> None:
        for kind in KINDS:
            self._f.objects.labels(reconciler=self.name, kind=kind).set(len(state.of_kind(kind)))
        self._f.objects.labels(reconciler=self.name, kind="nft").set(len(state.nft_tables()))

    def record_apply_now(self, result: ApplyResult, *, seconds: float) -> None:
        """What ``Reconciler.apply_now`` changed: its ops, group replaces and time (``mode="shortcut"``)."""
        self._record_applied(result, mode="shortcut", seconds=seconds)

    def record_sync(
        self, known: DesiredState, result: ApplyResult, *, full: bool, seconds: float, skipped: int, deferred: int
    ) -> None:
        """Everything one sync changes in the metrics; ``known`` is what we own after it."""
        self.sync(full=full, seconds=seconds)
        self._record_applied(result, mode="full" if full else "partial", seconds=seconds)
        self.skipped("backoff", skipped)
        self.skipped("prune_deferred", deferred)
        self.owned(known)

    def _record_applied(self, result: ApplyResult, *, mode: str, seconds: float) -> None:
        """The applied ops by kind and verb, the group replaces (and ``seconds`` under ``mode``), the failures."""
        # Counted first, then one increment per label set: a 10k-route sync is 1 inc, not 10k (the loop's time).
        applied = collections.Counter(
            (op.kind, op.verb) if isinstance(op, Op) else ("nft", "delete" if op.table is None else "replace")
            for op in result.applied
        )
        for (kind, verb), count in sorted(applied.items()):
            self.applied(kind, verb, count)
        groups = applied[("groups", "create")] + applied[("groups", "replace")]
        if groups:
            self._f.group_replaces.inc(groups)
            self._f.group_syncs.labels(mode=mode).observe(seconds)
        for kind, count in sorted(collections.Counter(object_id(f.op)[0] for f in result.failed).items()):
            self.error(kind, count)
