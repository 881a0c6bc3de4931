"""``sorted_in_steps``: ``sorted(set(items))`` that never holds the GIL for long, for threads beside an event loop.

``sorted()`` of 100k strings or tuples is ONE C call: 50-200 ms in which no other thread of the process runs
(measured as the longest stall of a thread beside a 100k-element nft observe, benchmarks/nft_observe.py). Here
the items are sorted in runs of ``RUN`` (a few milliseconds each) and the runs merged by ``heapq.merge``, a
Python generator, between whose steps the interpreter can hand the GIL over. The result is the same list.
Shaped for the latency of other threads, not for speed: it costs about as much CPU as one sort. An audit's reader
steps aside between runs while the sync path works (``magw.util.courtesy``). Pure.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from typing import Any, TypeVar

from magw.util.courtesy import step_aside

T = TypeVar("T", bound=Any)

RUN = 4096


def sorted_in_steps(items: Iterable[T]) -> list[T]:
    """``sorted(set(items))`` (items must be hashable and comparable), sorted in short runs then merged."""
    unique = list(dict.fromkeys(items))
    if len(unique) <= RUN:
        return sorted(unique)
    runs = []
    for i in range(0, len(unique), RUN):
        step_aside()
        runs.append(sorted(unique[i : i + RUN]))
    merged = heapq.merge(*runs)
    out: list[T] = []
    while chunk := list(itertools.islice(merged, RUN)):
        out.extend(chunk)
        step_aside()
    return out
