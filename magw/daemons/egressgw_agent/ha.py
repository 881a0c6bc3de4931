"""The node's egress-HA agent: keepalived's events -> per-VIP master state -> conntrackd, status, callback.

keepalived decides who holds a VIP; this agent only listens (its notify FIFO) and acts on what it hears:

- per VIP, whether this node is master and since when (RFC 3339 UTC, this node's clock);
- conntrackd's transitions, node-wide because one conntrackd serves every VIP of the node: when a VIP
  becomes MASTER here, commit the synced flows (``-c -f -R -B``); when the node is master of *no* VIP any
  more, ask for a resync (``-n``; nothing on FAULT) and, ``PURGE_DELAY`` s later unless it is master of a VIP
  again by then, delete the kernel's entries NATed through the VIPs (``vip_addresses``; not conntrackd's ``-t``,
  which flushes every NATed flow of the node: magw.drivers.conntrackd.process). While still master of another
  VIP nothing is done: that VIP's flows are this node's;
- a callback for each change of this node's master-ness of a VIP (the lead wires it to EgressVIPStatus);
- the status endpoint (magw.daemons.egressgw_agent.status_http) reads ``status()``.

The agent also holds the lock file that keepalived's ``magw_agent`` check probes (``flock``): while the
agent lives the check passes; when it dies the kernel drops the lock and keepalived gives the VIPs up.
conntrackd commands run in a worker thread, one transition at a time, in the order of the events.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from ipaddress import IPv4Address

import attrs
import structlog

from magw.drivers.conntrackd.process import Conntrackd
from magw.drivers.conntrackd.purge import deleted
from magw.drivers.conntrackd.step import Step
from magw.drivers.keepalived.events import State, VrrpEvent, read_events

log = structlog.get_logger(__name__)

HolderCallback = Callable[[str, bool, str], Awaitable[None]]
PURGE_DELAY = 60.0  # s, as conntrackd's PurgeTimeout: packets of the moved flows still in flight, a quick return


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.frozen(kw_only=True)
class VipState:
    """What this node knows of one VIP: keepalived's last state for it and since when."""

    name: str
    state: State
    since: str

    @property
    def master(self) -> bool:
        return self.state == "MASTER"


class AgentLock:
    """The flock that keepalived's agent check probes; held from ``acquire`` until ``release`` or death."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None


class EgressHA:
    """Consumes VRRP events for ``node``; ``conntrackd`` None when conntrack sync is off."""

    def __init__(
        self,
        node: str,
        *,
        conntrackd: Conntrackd | None = None,
        on_holder_change: HolderCallback | None = None,
        clock: Callable[[], str] = utc_now,
        purge_delay: float = PURGE_DELAY,
    ) -> None:
        self.node = node
        self.conntrackd = conntrackd
        self.on_holder_change = on_holder_change
        self.clock = clock
        self.purge_delay = purge_delay
        self.vip_addresses: tuple[IPv4Address, ...] = ()  # every VIP of the model (EgressHANode.apply sets them)
        self._vips: dict[str, VipState] = {}
        self._ct_lock = asyncio.Lock()
        self._purge: asyncio.Task[None] | None = None
        self.transitions: list[tuple[str, tuple[Step, ...]]] = []  # (transition, steps), for logs and tests

    def status(self) -> dict[str, object]:
        """The status endpoint's body: this node, and per VIP whether it is master here and since when."""
        vips = [
            {"name": v.name, "master": v.master, "state": v.state, "since": v.since}
            for v in sorted(self._vips.values(), key=lambda v: v.name)
        ]
        return {"node": self.node, "vips": vips}

    def vip(self, name: str) -> VipState | None:
        return self._vips.get(name)

    def masters(self) -> tuple[str, ...]:
        return tuple(sorted(n for n, v in self._vips.items() if v.master))

    async def handle(self, event: VrrpEvent) -> None:
        """Apply one event: state, then conntrackd, then the callback (so a holder it reports has committed)."""
        if event.kind != "INSTANCE":
            return
        old = self._vips.get(event.name)
        if old is not None and old.state == event.state:
            return
        was_master_somewhere = bool(self.masters())
        since = self.clock()
        self._vips[event.name] = VipState(name=event.name, state=event.state, since=since)
        log.info("egress_ha.state", node=self.node, vip=event.name, state=event.state, since=since)
        await self._conntrackd(event.state, was_master_somewhere)
        became = event.state == "MASTER"
        if became != (old is not None and old.master) and self.on_holder_change is not None:
            try:
                await self.on_holder_change(event.name, became, since)
            except Exception as exc:  # the callback is someone else's; keep listening to keepalived
                log.error("egress_ha.callback_failed", node=self.node, vip=event.name, error=str(exc))

    async def _conntrackd(self, state: State, was_master_somewhere: bool) -> None:
        ctd = self.conntrackd
        if ctd is None:
            return
        if state == "MASTER":
            self._cancel_purge()
            name, run = "master", ctd.become_master
        elif self.masters():
            return  # still master of another VIP: its flows are this node's, nothing to step back from
        elif state == "FAULT":
            name, run = "fault", ctd.become_fault
        elif state == "BACKUP" or was_master_somewhere:
            name, run = "backup", ctd.become_backup
        else:
            return
        async with self._ct_lock:
            steps = await asyncio.to_thread(run)
        self.transitions.append((name, steps))
        failed = [s for s in steps if s.returncode != 0]
        report = log.error if failed else log.info
        report(
            "egress_ha.conntrackd",
            node=self.node,
            transition=name,
            steps=[(s.option, s.returncode) for s in steps],
            errors=[s.output for s in failed],
        )
        if name != "master" and (self._purge is None or self._purge.done()):  # one pending purge, as -t's alarm
            self._purge = asyncio.create_task(self._purge_later(ctd), name=f"egress-ha-purge-{self.node}")

    def close(self) -> None:
        """Drop a pending purge (the agent stops)."""
        self._cancel_purge()

    def _cancel_purge(self) -> None:
        if self._purge is not None and not self._purge.done():
            self._purge.cancel()
            log.info("egress_ha.purge_cancelled", node=self.node)
        self._purge = None

    async def _purge_later(self, ctd: Conntrackd) -> None:
        """``purge_delay`` s after the node became master of no VIP: delete the entries NATed through the VIPs,
        unless it is master of one again (then the MASTER transition has cancelled this task)."""
        await asyncio.sleep(self.purge_delay)
        vips = self.vip_addresses
        if self.masters() or not vips:
            return
        async with self._ct_lock:
            steps = await asyncio.to_thread(ctd.purge, vips)
        self.transitions.append(("purge", steps))
        failed = [s for s in steps if s.returncode != 0]
        report = log.error if failed else log.info
        report("egress_ha.purged", node=self.node, vips=[str(v) for v in vips],
               deleted=sum(deleted(s) for s in steps), errors=[s.output for s in failed])  # fmt: skip

    async def run(self, fifo: str) -> None:
        """Handle the events of keepalived's notify FIFO ``fifo`` until cancelled."""
        try:
            async for event in read_events(fifo):
                await self.handle(event)
        finally:
            self.close()
