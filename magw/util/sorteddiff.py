"""What differs between two sequences sorted by a key, in time that grows with what differs (pure).

Shaped for speed (docs/performance.md, row 22b): a Globalnet gateway gets a new tuple of 100k pods for every pod
event, in which all but one or two are the very objects of the last tuple. Both sequences are cut at the same
keys into blocks of at most ``BLOCK`` elements a side; equal blocks compare as tuples in C (identity first, so
an unchanged block costs a pointer comparison per element), and only the blocks that differ are counted
element by element. 100k pods: a few hundred block comparisons instead of 100k hashes.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

T = TypeVar("T", bound=Hashable)

BLOCK = 256


def sorted_changes(
    old: Sequence[T], new: Sequence[T], key: Callable[[T], Any], *, block: int = BLOCK
) -> tuple[list[T], list[T]]:
    """(in ``old`` only, in ``new`` only), as multisets compared by equality, for two sequences sorted by ``key``;
    ``block``: elements a side per comparison (the tests use small ones).

    An element whose key is in both but whose value changed is in both lists. Elements with equal keys may be
    reported on both sides when a block boundary falls among them; the multiset difference stays exact in sum
    (removing the first list from ``old`` and adding the second gives ``new``'s elements).
    """
    gone: list[T] = []
    fresh: list[T] = []
    oi = ni = 0
    while oi < len(old) or ni < len(new):  # each round moves one side ahead by ``block``, or ends both
        oj, nj = len(old), len(new)
        if oi + block < oj and (ni + block >= nj or key(old[oi + block]) <= key(new[ni + block])):
            oj = oi + block
            nj = bisect.bisect_left(new, key(old[oj]), ni, nj, key=key)
        elif ni + block < nj:
            nj = ni + block
            oj = bisect.bisect_left(old, key(new[nj]), oi, oj, key=key)
        o_block, n_block = tuple(old[oi:oj]), tuple(new[ni:nj])
        if o_block != n_block:
            left, right = Counter(o_block), Counter(n_block)
            gone += (left - right).elements()
            fresh += (right - left).elements()
        oi, ni = oj, nj
    return gone, fresh
