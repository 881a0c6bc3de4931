"""``give_back_heap()``: return the C heap's free memory to the system (glibc ``malloc_trim``; elsewhere nothing).

glibc keeps what was freed, and each thread that allocates gets an arena of its own, which cannot reuse another
arena's free memory. Two places in ``magw apply`` at 100k routes hand memory back where it would otherwise add to
the peak RSS (issue 10, target 250 MB):

- after planning: the loaded snapshot's lists and strings (about 11 MB), before libnftables, in the nft
  thread's own arena, takes its ~135 MB for the set (``magw.cli.apply``);
- after an nft listing: libnftables' ~150 MB for a listed 100k-element set, before the routes are observed
  (``magw.drivers.nft.driver``).

Costs a few milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes


def give_back_heap() -> None:
    with contextlib.suppress(AttributeError, OSError):  # not glibc: nothing to do
        ctypes.CDLL(None).malloc_trim(0)
