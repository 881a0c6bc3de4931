"""``magw-globalnet``: the single-replica Globalnet controller over a file broker directory.

It waits for the lease ``globalnet-<cluster>`` (a second replica waits there), then runs a pass
(``GlobalnetController.reconcile``) whenever the broker directory may have changed (every
``--poll-interval``), plus at least every ``--resync`` seconds (a gone gateway's grace period ends
without any file changing). Passes run in one worker thread, off the event loop, which keeps renewing
the lease every ``--lease-duration``/3. A pass that fails (an I/O error) is retried with backoff
(0.1 s doubling to 5 s); nothing after winning the lease ends the process except SIGTERM/SIGINT, which
release the lease. Losing the lease (a renewal that fails) stops writes at once (the next write raises
``LeaseLost``) and sends the process back to waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import structlog

from magw.controllers.globalnet.controller import GlobalnetController, GlobalnetPassResult, LeaseLost
from magw.sources.file.broker import FileBroker
from magw.sources.file.globalnet_store import GlobalnetStore
from magw.sources.file.lease import FileLease

log = structlog.get_logger(__name__)

BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0


class Daemon:
    """The controller's loop over the file broker; ``kube_daemon.KubeDaemon`` swaps the lease and the source."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.renewed_at = 0.0
        self.holding = False
        self.controller = self._controller(args)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="magw-globalnet")

    def _controller(self, args: argparse.Namespace) -> GlobalnetController:
        self.lease = FileLease(args.broker_dir, f"globalnet-{args.cluster}", args.identity, args.lease_duration)
        return GlobalnetController(
            source=FileBroker(args.broker_dir, local_cluster=args.cluster),
            store=GlobalnetStore(args.broker_dir, args.cluster),
            grace=timedelta(seconds=args.gateway_grace),
            may_write=self.lease_valid,
        )

    def lease_valid(self) -> bool:
        """Still ours with a margin: a write must land before another replica could take over."""
        return self.holding and time.time() < self.renewed_at + self.args.lease_duration * 0.8

    async def _renew(self) -> bool:
        loop = asyncio.get_running_loop()
        try:
            ok = await loop.run_in_executor(None, self.lease.try_acquire)
        except OSError as exc:
            log.warning("globalnet.lease_error", error=str(exc))
            ok = False
        if ok:
            self.renewed_at = time.time()
            if not self.holding:
                log.info("globalnet.lease_acquired", identity=self.args.identity, cluster=self.args.cluster)
        elif self.holding:
            log.warning("globalnet.lease_lost", identity=self.args.identity)
        self.holding = ok
        return ok

    async def run(self, stop: asyncio.Event) -> int:
        loop = asyncio.get_running_loop()
        backoff = BACKOFF_FIRST
        last_pass = 0.0
        waiting_logged = False
        while not stop.is_set():
            if not await self._ensure_lease():
                if not waiting_logged:
                    log.info("globalnet.lease_waiting", holder=await self._holder())
                    waiting_logged = True
                await _sleep(stop, self.args.lease_duration / 3)
                continue
            waiting_logged = False
            try:
                result: GlobalnetPassResult = await loop.run_in_executor(self.executor, self.controller.reconcile)
            except LeaseLost as exc:
                log.warning("globalnet.lease_lost", reason=str(exc))
                self.holding = False
                continue
            except OSError as exc:
                log.warning("globalnet.pass_failed", error=str(exc), retry_in=backoff)
                await _sleep(stop, backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            backoff = BACKOFF_FIRST
            if result.written or result.deleted or time.time() - last_pass > self.args.resync:
                last_pass = time.time()
                if result.planned:
                    log.info(
                        "globalnet.pass",
                        written=result.written,
                        deleted=result.deleted,
                        waiting=result.waiting,
                        pool=f"{result.pool_used}/{result.pool_size}",
                    )
            await self._idle(stop)
        await self._release()
        self.executor.shutdown(wait=True)
        return 0

    # ----- the lease and the wait between passes: the file broker's here, Kubernetes' in kube_daemon ----

    async def _ensure_lease(self) -> bool:
        """True while this replica holds the lease (renewed here every duration/3)."""
        if self.holding and time.time() - self.renewed_at <= self.args.lease_duration / 3:
            return True
        return await self._renew()

    async def _holder(self) -> str:
        holder = self.lease.read()
        return holder.holder if holder else ""

    async def _idle(self, stop: asyncio.Event) -> None:
        await _sleep(stop, self.args.poll_interval)

    async def _release(self) -> None:
        if self.holding:
            self.lease.release()
            log.info("globalnet.lease_released", identity=self.args.identity)


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
