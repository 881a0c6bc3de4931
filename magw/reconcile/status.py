"""Per-object status of a reconciler: pending, done, or error with its text.

Only the exceptions are stored (objects waiting or failing); every other desired
object is ``done`` once a sync has run. ``StatusBook.snapshot()`` lists all of
them, which is what ``Reconciler.status()`` and the daemons' status files show.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Literal

import attrs

from magw.desired.state import KINDS, DesiredState
from magw.reconcile.changeset import NftChange, Op, key_text
from magw.reconcile.driver import Failure
from magw.reconcile.retry import ObjectId, RetryBook, RetryEntry, object_id

State = Literal["pending", "done", "error"]


@attrs.frozen(kw_only=True)
class ObjectStatus:
    """The status of one object (``kind`` as in DesiredState, or ``nft``)."""

    kind: str
    key: str
    state: State
    verb: str | None = None
    error: str | None = None
    attempts: int = 0
    retry_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class ReconcilerStatus:
    """Everything ``status()`` reports."""

    name: str
    synced: bool
    syncs: int
    full_syncs: int
    last_sync_at: float | None
    last_full_sync_at: float | None
    objects: tuple[ObjectStatus, ...]

    def count(self, state: State) -> int:
        return sum(1 for o in self.objects if o.state == state)

    @property
    def converged(self) -> bool:
        """True when a sync has run and every object is done."""
        return self.synced and all(o.state == "done" for o in self.objects)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "synced": self.synced,
            "converged": self.converged,
            "syncs": self.syncs,
            "full_syncs": self.full_syncs,
            "last_sync_at": self.last_sync_at,
            "last_full_sync_at": self.last_full_sync_at,
            "counts": {s: self.count(s) for s in ("pending", "done", "error")},
            "objects": [o.to_json() for o in self.objects],
        }


def _desired_ids(desired: DesiredState) -> list[ObjectId]:
    ids: list[ObjectId] = [(kind, obj.key) for kind in KINDS for obj in desired.of_kind(kind)]
    ids += [("nft", t.key) for t in desired.nft_tables()]
    return ids


def _desired_keys(desired: DesiredState, kind: str) -> Iterator[Hashable]:
    """The keys of ``kind`` (or ``nft``) in ``desired``, in ``_desired_ids``' order."""
    if kind == "nft":
        yield from (t.key for t in desired.nft_tables())
    else:
        yield from (obj.key for obj in desired.of_kind(kind))


@attrs.define
class StatusBook:
    """Tracks the objects that are not simply done."""

    desired: DesiredState | None = None
    exceptions: dict[ObjectId, ObjectStatus] = attrs.field(factory=dict)

    def begin(self, desired: DesiredState) -> None:
        """A sync starts from this desired state; forget what the previous sync left over."""
        self.desired = desired
        self.exceptions.clear()

    def pending(self, oid: ObjectId, *, verb: str, reason: str) -> None:
        self.exceptions[oid] = ObjectStatus(kind=oid[0], key=key_text(oid[1]), state="pending", verb=verb, error=reason)

    def error(self, oid: ObjectId, entry: RetryEntry) -> None:
        self.exceptions[oid] = ObjectStatus(
            kind=oid[0],
            key=key_text(oid[1]),
            state="error",
            verb=entry.verb,
            error=entry.error,
            attempts=entry.attempts,
            retry_at=entry.retry_at,
        )

    def record(
        self,
        desired: DesiredState,
        retry: RetryBook,
        *,
        skipped: Iterable[Op | NftChange],
        deferred: Iterable[Op | NftChange],
        failed: Iterable[Failure],
    ) -> None:
        """The outcome of one sync: operations in backoff or failed are errors, deferred deletes pending."""
        self.begin(desired)
        for op in (*skipped, *(f.op for f in failed)):
            entry = retry.entries.get(object_id(op))
            if entry is not None:
                self.error(object_id(op), entry)
        for op in deferred:
            self.pending(object_id(op), verb="delete", reason="prune deferred: inputs not synced yet")

    def noted(self) -> tuple[int, tuple[ObjectStatus, ...]]:
        """How many desired objects are done, and the objects that are not, in ``snapshot()``'s order.

        What a status file needs, without making a status for each of thousands of done objects: it walks
        only the kinds that have a noted object (the route agent writes its status file on its event loop).
        """
        desired = self.desired
        if desired is None:
            return 0, tuple(self.exceptions.values())
        total = sum(len(desired.of_kind(kind)) for kind in KINDS) + len(desired.nft_tables())
        kinds = {oid[0] for oid in self.exceptions}
        out: list[ObjectStatus] = []
        seen: set[ObjectId] = set()
        for kind in (*KINDS, "nft"):
            if kind not in kinds:
                continue
            for key in _desired_keys(desired, kind):
                noted = self.exceptions.get((kind, key))
                if noted is not None:
                    seen.add((kind, key))
                    out.append(noted)
        out.extend(status for oid, status in self.exceptions.items() if oid not in seen)
        return total - len(seen), tuple(out)

    def snapshot(self) -> tuple[ObjectStatus, ...]:
        """Every desired object (done unless noted) plus the noted objects that are not desired."""
        out: list[ObjectStatus] = []
        seen: set[ObjectId] = set()
        if self.desired is not None:
            for oid in _desired_ids(self.desired):
                seen.add(oid)
                noted = self.exceptions.get(oid)
                out.append(noted or ObjectStatus(kind=oid[0], key=key_text(oid[1]), state="done"))
        out.extend(status for oid, status in self.exceptions.items() if oid not in seen)
        return tuple(out)
