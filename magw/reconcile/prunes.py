"""Holding back prunes: while a reconciler's inputs are not synced, its syncs create and replace, never delete.

Deleting routes because a watch has not caught up yet is the classic outage (docs/reconciler.md).
"""

from __future__ import annotations

from collections.abc import Callable

from magw.desired.state import DesiredState
from magw.reconcile.changeset import ChangeSet, NftChange, Op

Differ = Callable[[DesiredState, DesiredState], ChangeSet]


def split_prunes(changes: ChangeSet) -> tuple[ChangeSet, tuple[Op | NftChange, ...]]:
    """``changes`` without its deletes (nft table deletes too), and those deletes."""
    prunes: tuple[Op | NftChange, ...] = (
        *(op for op in changes.ops if op.verb == "delete"),
        *(ch for ch in changes.nft if ch.table is None),
    )
    kept = ChangeSet(
        ops=tuple(op for op in changes.ops if op.verb != "delete"),
        nft=tuple(ch for ch in changes.nft if ch.table is not None),
    )
    return kept, prunes


def changes_to_apply(
    differ: Differ, desired: DesiredState, observed: DesiredState, *, prune: bool
) -> tuple[ChangeSet, tuple[Op | NftChange, ...]]:
    """The diff, and the prunes held back unless ``prune`` (the inputs are synced)."""
    changes = differ(desired, observed)
    return (changes, ()) if prune else split_prunes(changes)
