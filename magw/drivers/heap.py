"""``give_back_heap()``: return the C heap's free memory to the system (glibc ``malloc_trim``; elsewhere nothing).

glibc keeps what was freed, and each thread that allocates gets an arena of its own, which cannot reuse another
arena's free memory. The nft driver hands it back at two moments where it would otherwise add to the peak RSS
of ``magw apply`` at 100k routes (docs/performance.md, target 250 MB; ``magw.drivers.nft.driver``):

- just before libnftables runs a large transaction (1 MiB of JSON and more): what the main thread freed (the
  loaded snapshot, the diff's indexes), before libnftables takes its ~140 MB for a 100k-element set in the nft
  thread's own arena;
- after a listing: libnftables' ~150 MB for a listed 100k-element set, before its JSON is parsed and the routes
  are observed.

Costs 0.1-1 ms a call.
"""

from __future__ import annotations

import contextlib
import ctypes


def give_back_heap() -> None:
    with contextlib.suppress(AttributeError, OSError):  # not glibc: nothing to do
        ctypes.CDLL(None).malloc_trim(0)
