"""``magw-globalnet``: the single-replica Globalnet controller over a file broker directory.

It waits for the lease ``globalnet-<cluster>`` (a second replica waits there), then runs a pass
(``GlobalnetController.reconcile``) whenever the broker's snapshot or its unreadable files change (the broker
follows the directory with inotify, ``magw.sources.file.wakeup``; every ``--poll-interval`` where it cannot),
plus at least every ``--resync`` seconds (a gone gateway's grace period ends without any file changing) and
every ``--lease-duration``/3, when the pass renews the lease on its way. Passes run in one worker thread, off
the event loop. A pass that fails (an I/O error) is retried with backoff
(``GLOBALNET_PASS_BACKOFF``: 0.1 s doubling to 5 s); nothing after winning the lease ends the process except
SIGTERM/SIGINT, which release the lease. Losing the lease (a renewal that fails) stops writes at once (the
next write raises ``LeaseLost``) and sends the process back to waiting, which looks at the lease again every
``--lease-duration``/3. When a turn runs is the trigger loop's (``magw.reconcile.trigger``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import timedelta

import structlog
from prometheus_client import CollectorRegistry

from magw.controllers.globalnet.controller import GlobalnetController, GlobalnetPassResult, LeaseLost
from magw.metrics.globalnet import GlobalnetMetrics
from magw.reconcile.retry import GLOBALNET_PASS_BACKOFF
from magw.reconcile.trigger import DONE, Outcome, Trigger, Wake
from magw.sources.file.broker import FileBroker
from magw.sources.file.globalnet_store import GlobalnetStore
from magw.sources.file.lease import FileLease

log = structlog.get_logger(__name__)


class Daemon:
    """The controller's loop over the file broker; ``kube.KubeDaemon`` swaps the lease and the source."""

    def __init__(self, args: argparse.Namespace, registry: CollectorRegistry | None = None) -> None:
        self.args = args
        # its own registry unless given one (main passes prometheus_client's REGISTRY): two in one process
        # must not collide
        self.metrics = GlobalnetMetrics(registry if registry is not None else CollectorRegistry())
        self.renewed_at = 0.0
        self.holding = False
        self._waiting_logged = False
        self._logged_at = 0.0  # when a pass was last logged (at least every --resync)
        self.controller = self._controller(args)
        self._following: asyncio.Task[None] | None = None
        resync, settle = self._schedule()
        self.trigger = Trigger(
            "globalnet",
            self._turn,
            resync=resync,
            settle=settle,
            backoff=GLOBALNET_PASS_BACKOFF,
            retry_on=(OSError,),
            failed_event="globalnet.pass_failed",
        )

    def _controller(self, args: argparse.Namespace) -> GlobalnetController:
        self.lease = FileLease(args.broker_dir, f"globalnet-{args.cluster}", args.identity, args.lease_duration)
        self.broker = FileBroker(args.broker_dir, local_cluster=args.cluster, poll_interval=args.poll_interval)
        self.broker.subscribe(lambda _snapshot: self.trigger.mark_dirty("broker"))
        return GlobalnetController(
            source=self.broker,
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
        self._follow()
        try:
            await self.trigger.run(stop)  # ends after the pass in progress, and ends the worker thread
        finally:
            await self._release()
        return 0

    async def _turn(self, _wake: Wake) -> Outcome:
        """Hold the lease (else look again in a third of its duration), then one pass in the trigger's worker
        thread. An ``OSError`` goes to the trigger: logged as ``globalnet.pass_failed``, retried with backoff."""
        if not await self._ensure_lease():
            if not self._waiting_logged:
                log.info("globalnet.lease_waiting", holder=await self._holder())
                self._waiting_logged = True
            return Outcome(pause=self.args.lease_duration / 3)
        self._waiting_logged = False
        try:
            result: GlobalnetPassResult = await self.trigger.offload(self.controller.reconcile)
        except LeaseLost as exc:
            log.warning("globalnet.lease_lost", reason=str(exc))
            self.holding = False
            return Outcome(pause=0.0)  # back to the lease at once
        self.metrics.passed(result)
        if result.written or result.deleted or time.time() - self._logged_at > self.args.resync:
            self._logged_at = time.time()
            if result.planned:
                log.info(
                    "globalnet.pass",
                    written=result.written,
                    deleted=result.deleted,
                    waiting=result.waiting,
                    pool=f"{result.pool_used}/{result.pool_size}",
                )
        return DONE

    # ----- the lease and the schedule of passes: the file broker's here, Kubernetes' in kube.py ----------

    def _schedule(self) -> tuple[float, float]:
        """The trigger's period and settle delay: a turn when the broker saw a change, at once, and at least every
        ``--resync`` or a third of the lease's duration, whichever is shorter (the turn renews the lease)."""
        return min(self.args.resync, self.args.lease_duration / 3), 0.0

    def _follow(self) -> None:
        """The broker follows its directory in a task of its own; its listener marks the trigger dirty. Should it
        end with an error (a bug), passes go on at the trigger's period, each scanning for itself, and the
        error is logged at once and raised when the daemon stops."""
        self._following = asyncio.create_task(self.broker.run(), name="broker")
        self._following.add_done_callback(_log_failure)

    async def _ensure_lease(self) -> bool:
        """True while this replica holds the lease (renewed here every duration/3)."""
        if self.holding and time.time() - self.renewed_at <= self.args.lease_duration / 3:
            return True
        return await self._renew()

    async def _holder(self) -> str:
        holder = self.lease.read()
        return holder.holder if holder else ""

    async def _release(self) -> None:
        following, self._following = self._following, None
        try:
            if following is not None:
                self.broker.stop()  # run() ends after its pass in progress
                await following
        finally:
            if self.holding:
                self.lease.release()
                log.info("globalnet.lease_released", identity=self.args.identity)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("globalnet.broker_failed", error=repr(exc))
