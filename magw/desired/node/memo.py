"""The planner's memo: the last plan's pieces, handed back when their inputs are the very same objects.

One Endpoint change under 100k routes must reach the kernel in under a second (docs/performance.md), and a plan of
100k routes from scratch costs about 0.7 s on this machine (profile of ``plan(snapshot, "e-w1")`` on
``benchmarks/event_latency.py``'s broker: the overlap check 0.43 s, the two CIDR sets 0.44 s, the
routes and their sort 0.4 s, under cProfile). The file broker keeps the parsed ``Cluster`` object of every
cluster document whose content did not change (``magw.snapshot.cache``), so a piece that depends only on
such clusters can be reused by identity: no hashing or comparing of 100k networks to find out.

What a hit gives back is the very object the last plan returned, so the reconciler's diff can skip a kind
whose tuple is the one the kernel already holds (``magw.reconcile.diff``). A memo changes no result: a plan
with a memo equals a plan without one (``tests/unit/desired/test_plan_memo.py`` checks both ways round).

Rules:

- ``get(slot, same, compute, values=...)``: ``same`` is compared by identity (``is``), element by element;
  ``values`` (small, hashable) by equality. The entry keeps references to its inputs, so an id is never
  reused while it is compared against.
- A slot is used at most once per plan. Only the slots used by the last complete plan are kept
  (``round``): memory is bounded by one plan's pieces, and a plan that raised leaves the memo as it was.
- Objects of the model are frozen (attrs) and never mutated, which is what makes identity a valid key.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


@attrs.frozen
class _MemoEntry:
    same: tuple[object, ...]
    values: Hashable
    value: Any


class PlanMemo:
    """Pieces of the last plan of one node, reused by the next plan when their inputs did not change."""

    def __init__(self) -> None:
        self._last: dict[Hashable, _MemoEntry] = {}
        self._this: dict[Hashable, _MemoEntry] = {}

    @contextlib.contextmanager
    def round(self) -> Iterator[PlanMemo]:
        """One plan: the slots it used replace the memo when it returns; nothing changes when it raises."""
        self._this = {}
        try:
            yield self
        except BaseException:
            self._this = {}
            raise
        self._last, self._this = self._this, {}

    def get(self, slot: Hashable, same: tuple[object, ...], compute: Callable[[], T], *, values: Hashable = None) -> T:
        """``compute()``, or what it returned last time if ``same`` are the same objects and ``values`` equal."""
        entry = self._last.get(slot)
        if (
            entry is not None
            and len(entry.same) == len(same)
            and all(map(operator.is_, entry.same, same))
            and entry.values == values
        ):
            value: T = entry.value
        else:
            value = compute()
        self._this[slot] = _MemoEntry(same=same, values=values, value=value)
        return value

    def carried(self, slot: Hashable) -> dict[Any, Any]:
        """A table the last plan left in ``slot`` (empty if none), for pieces too many and too small for
        ``get``'s per-slot bookkeeping (a gateway's 5,000 peers); the caller fills a new table and
        ``carry``s it into this plan, which drops the entries it no longer used."""
        entry = self._last.get(slot)
        table: dict[Any, Any] = {} if entry is None else entry.value
        return table

    def carry(self, slot: Hashable, table: dict[Any, Any]) -> None:
        """Keep ``table`` in ``slot`` for the next plan (see ``carried``)."""
        self._this[slot] = _MemoEntry(same=(), values=None, value=table)

    def __len__(self) -> int:
        return len(self._last)
