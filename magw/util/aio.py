"""Small asyncio helpers shared by the daemons, with no dependency of their own (the Kubernetes sources and
the gateway wait this way; controllers and syncers wait on ``magw.reconcile.trigger`` instead)."""

from __future__ import annotations

import asyncio


async def wait_first(stop: asyncio.Event, wake: asyncio.Event | None, timeout: float | None = None) -> bool:
    """Until ``stop`` or ``wake`` is set (True), or ``timeout`` passes (False)."""
    waiters = {asyncio.ensure_future(stop.wait())}
    if wake is not None:
        waiters.add(asyncio.ensure_future(wake.wait()))
    try:
        done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
    return bool(done)
