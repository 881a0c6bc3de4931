"""Per-object retries with capped exponential backoff (cilium/statedb style).

An operation that failed is left out of later syncs until its retry time. The
backoff belongs to the object AND to what we wanted it to be: when the desired
object changes (or the object no longer needs any operation), its backoff is
cleared and the new operation runs at the next sync.

``Backoff`` is also the delay of a whole failed pass in the trigger loops (``magw.reconcile.trigger``); their
bounds are named here, at the end, so that they live in one place.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import attrs

from magw.reconcile.changeset import ChangeSet, NftChange, Op
from magw.reconcile.driver import Failure

# An object's identity across syncs: (kind, key); nft tables are ("nft", (family, name)).
ObjectId = tuple[str, Hashable]


def object_id(op: Op | NftChange) -> ObjectId:
    if isinstance(op, Op):
        return (op.kind, op.obj.key)
    return ("nft", (op.family, op.name))


def target(op: Op | NftChange) -> object:
    """What the operation makes the object be: the object itself, or None for a delete."""
    if isinstance(op, Op):
        return None if op.verb == "delete" else op.obj
    return op.table


@attrs.frozen(kw_only=True)
class Backoff:
    """``base * 2**(attempt-1)`` seconds, at most ``cap``."""

    base: float = 0.5
    cap: float = 60.0

    def __attrs_post_init__(self) -> None:
        if self.base <= 0:
            raise ValueError(f"backoff_base: must be > 0, got {self.base}")
        if self.cap < self.base:
            raise ValueError(f"backoff_cap: must be >= backoff_base ({self.base}), got {self.cap}")

    def delay(self, attempt: int) -> float:
        return float(min(self.cap, self.base * 2 ** min(attempt - 1, 62)))

    @classmethod
    def constant(cls, seconds: float) -> Backoff:
        """The same delay after every failure (a pass retried at the next tick)."""
        return cls(base=seconds, cap=seconds)


# The backoffs of the trigger loops' failed passes (magw.reconcile.trigger), in one place.
GLOBALNET_PASS_BACKOFF = Backoff(base=0.1, cap=5.0)  # magw-globalnet: a pass's I/O error (docs/globalnet.md)
OVN_SYNC_BACKOFF = Backoff(base=0.5, cap=10.0)  # the OVN syncer: a failed NB sync (docs/ovn.md)


@attrs.frozen(kw_only=True)
class RetryEntry:
    """The last failure of one object."""

    target: object
    attempts: int
    retry_at: float
    error: str
    verb: str


@attrs.frozen(kw_only=True)
class Filtered:
    """A ChangeSet with the operations still in backoff left out."""

    changes: ChangeSet
    skipped: tuple[Op | NftChange, ...]


@attrs.define
class RetryBook:
    """The backoff state of every object whose last operation failed."""

    backoff: Backoff = Backoff()
    entries: dict[ObjectId, RetryEntry] = attrs.field(factory=dict)

    def filter(self, changes: ChangeSet, now: float) -> Filtered:
        """Leave out the operations whose object is still waiting for its retry time.

        Entries of objects that need no operation any more, or whose desired value
        changed, are dropped: that is what clears a backoff.
        """
        every: list[Op | NftChange] = [*changes.ops, *changes.nft]
        wanted = {object_id(op): target(op) for op in every}
        for oid in list(self.entries):
            if oid not in wanted or wanted[oid] != self.entries[oid].target:
                del self.entries[oid]
        skipped: list[Op | NftChange] = []

        def due(op: Op | NftChange) -> bool:
            entry = self.entries.get(object_id(op))
            if entry is None or now >= entry.retry_at:
                return True
            skipped.append(op)
            return False

        ops = tuple(op for op in changes.ops if due(op))
        nft = tuple(ch for ch in changes.nft if due(ch))
        return Filtered(changes=ChangeSet(ops=ops, nft=nft), skipped=tuple(skipped))

    def record(self, applied: Iterable[Op | NftChange], failed: Iterable[Failure], now: float) -> list[RetryEntry]:
        """Clear the backoff of what succeeded; start or extend it for what failed. Returns the new entries."""
        for op in applied:
            self.entries.pop(object_id(op), None)
        out: list[RetryEntry] = []
        for failure in failed:
            oid = object_id(failure.op)
            previous = self.entries.get(oid)
            want = target(failure.op)
            attempts = previous.attempts + 1 if previous is not None and previous.target == want else 1
            verb = failure.op.verb if isinstance(failure.op, Op) else ("delete" if want is None else "replace")
            entry = RetryEntry(
                target=want,
                attempts=attempts,
                retry_at=now + self.backoff.delay(attempts),
                error=failure.error,
                verb=verb,
            )
            self.entries[oid] = entry
            out.append(entry)
        return out

    def next_retry(self) -> float | None:
        """The earliest retry time, or None when nothing waits."""
        return min((e.retry_at for e in self.entries.values()), default=None)
