"""What one sync of a Reconciler did (``SyncResult``), as its ``on_sync`` listener and ``sync_once`` see it, and
how it is logged (``log_sync``)."""

from __future__ import annotations

import attrs
import structlog

from magw.reconcile.changeset import NftChange, Op, key_text
from magw.reconcile.driver import Failure
from magw.reconcile.retry import RetryBook, object_id

log = structlog.get_logger("magw.reconcile.loop")  # the loop's events, under the loop's logger name as before


@attrs.frozen(kw_only=True)
class SyncResult:
    """What one sync did. ``planned`` is False when the planner returned None (nothing ran)."""

    full: bool
    planned: bool
    reasons: tuple[str, ...] = ()
    applied: tuple[Op | NftChange, ...] = ()
    failures: tuple[Failure, ...] = ()
    skipped: int = 0
    deferred: int = 0
    took_ms: float = 0.0
    # Where took_ms went, in order: ("plan", ms), ("observe", ms), ("diff", ms), ("apply", ms), ("record", ms),
    # each timed in the worker thread (observe only when it ran on the sync's path, apply only when something
    # differed); the rest of took_ms is the hand-off to the worker thread
    phases_ms: tuple[tuple[str, float], ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the sync ran and nothing failed, was skipped or deferred."""
        return self.planned and self.error is None and not self.failures and not self.skipped and not self.deferred


def log_sync(name: str, sync: SyncResult, retry: RetryBook, now: float) -> None:
    """Log ``reconciler.op_failed`` per failure (with its retry), ``reconciler.prune_deferred``, ``sync_done``."""
    for failure in sync.failures:
        oid = object_id(failure.op)
        entry = retry.entries.get(oid)
        log.warning(
            "reconciler.op_failed",
            name=name,
            kind=oid[0],
            key=key_text(oid[1]),
            verb=entry.verb if entry is not None else None,
            error=failure.error,
            attempt=entry.attempts if entry is not None else None,
            retry_in=round(entry.retry_at - now, 3) if entry is not None else None,
        )
    if sync.deferred:
        log.info("reconciler.prune_deferred", name=name, deferred=sync.deferred)
    log.info(
        "reconciler.sync_done",
        name=name,
        full=sync.full,
        changes=len(sync.applied),
        failed=len(sync.failures),
        skipped=sync.skipped,
        deferred=sync.deferred,
        took_ms=sync.took_ms,
        reasons=",".join(sync.reasons),
        **{f"{phase}_ms": ms for phase, ms in sync.phases_ms},
    )
