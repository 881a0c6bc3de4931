"""The end of a one-thread worker (the reconciler's and its audit's), awaited without blocking the event loop."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor


async def close_worker(executor: ThreadPoolExecutor | None) -> None:
    """Wait for the call in progress on ``executor`` (one worker thread), then end the thread. None: nothing."""
    if executor is None:
        return
    drained = asyncio.wrap_future(executor.submit(lambda: None))  # one worker: runs after the call in progress
    executor.shutdown(wait=False)
    await drained
    # The call's future completes before its thread has seen the shutdown and ended: join it (off the loop), so
    # that "closed" means the thread is gone (a test of the Globalnet trigger caught the thread still alive).
    await asyncio.to_thread(executor.shutdown, wait=True)
