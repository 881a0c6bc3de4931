"""Run a lab step for many namespaces at once: ``parallel(fn, items)`` on a small thread pool.

Every step is a bounded subprocess (``ip``, ``nft``, ``ovs-vsctl``...), so threads overlap their waits. Shared by
the network build (``magw.lab.build.lifecycle``) and the OVN nodes (``magw.lab.planes.ovn_nodes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

PARALLEL = 8

T = TypeVar("T")


def parallel(fn: Callable[..., T], items: Iterable[tuple[object, ...]]) -> list[T]:
    """``fn(*item)`` for every item, in item order; re-raises the first failure (in item order)."""
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        futures = [pool.submit(fn, *item) for item in items]
        return [f.result() for f in futures]
