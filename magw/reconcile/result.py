"""What one sync of a Reconciler did (``SyncResult``), as its ``on_sync`` listener and ``sync_once`` see it."""

from __future__ import annotations

import attrs

from magw.reconcile.changeset import NftChange, Op
from magw.reconcile.driver import Failure


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
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the sync ran and nothing failed, was skipped or deferred."""
        return self.planned and self.error is None and not self.failures and not self.skipped and not self.deferred
