"""The interface every driver (fake or real) offers to the reconciler."""

from __future__ import annotations

from typing import Protocol

import attrs

from magw.desired.state import DesiredState
from magw.reconcile.changeset import ChangeSet, NftChange, Op


@attrs.frozen(kw_only=True)
class Failure:
    """One operation that failed, with the reason in words (e.g. ``ENODEV: no device vx-submariner``)."""

    op: Op | NftChange
    error: str

    def describe(self) -> str:
        what = self.op.describe() if isinstance(self.op, Op) else f"nft table {self.op.family} {self.op.name}"
        return f"{what}: {self.error}"


@attrs.frozen(kw_only=True)
class ApplyResult:
    """What ``apply`` did. A failure of one object never stops the others."""

    applied: tuple[Op | NftChange, ...] = ()
    failed: tuple[Failure, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed


class Driver(Protocol):
    """Observes only what we own and carries out a ChangeSet."""

    def observe(self) -> DesiredState: ...

    def apply(self, changes: ChangeSet) -> ApplyResult: ...
