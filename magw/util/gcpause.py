"""``gc_paused()``: no cyclic garbage collection while a large acyclic structure is built.

Loading a 100k-CIDR snapshot and planning it allocate a few million objects (YAML nodes,
networks, attrs values), none of them in reference cycles: reference counting frees them
all. Python's cyclic collector still runs on allocation counts and walks the growing heap
again and again; the profile in docs/performance.md put that at about a quarter of load and plan time.
Pausing it for the duration is safe (nothing cyclic is made there) and restores the
collector as it was, even on an exception. Pure: no I/O.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block, if it was enabled; re-enable it after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
