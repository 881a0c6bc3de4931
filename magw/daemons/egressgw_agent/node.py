"""One node's egress HA: keepalived and conntrackd rendered from the EgressGateway model and kept running, plus
the agent that listens to keepalived (magw.daemons.egressgw_agent.ha) and its lock.

``apply(egress, node_ips)`` is level-driven: it renders both configs from the whole model and makes the
processes match. keepalived reloads on a changed config (SIGHUP keeps its VRRP state); conntrackd has no
reload, so a changed peer set restarts it (then, if this node is master of a VIP, ``-R -B`` refills its
internal cache from the kernel and sends it to the new peers). A node that is a candidate of no VIP runs
neither. conntrackd starts before keepalived, so a node never becomes master without it.

Files, all under ``workdir`` (private to this node): keepalived/ (conf, PID files, notify FIFO, log),
conntrackd/ (conf, control socket, lock, log), agent.lock (keepalived's check probes it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import structlog

from magw.daemons.egressgw_agent.ha import AgentLock, EgressHA, HolderCallback
from magw.drivers.conntrackd.config import ConntrackdNode
from magw.drivers.conntrackd.config import render as render_conntrackd
from magw.drivers.conntrackd.process import Conntrackd
from magw.drivers.keepalived.config import AgentCheck, KeepalivedNode
from magw.drivers.keepalived.config import render as render_keepalived
from magw.drivers.keepalived.process import Keepalived
from magw.model import Snapshot
from magw.model.egressgw import EgressGateway

log = structlog.get_logger(__name__)


def inter_cluster(snapshot: Snapshot) -> list[IPv4Network]:
    """The remote clusters' CIDRs that overlap none of the local cluster's (so, with Globalnet, their global CIDRs):
    the flows between clusters, which a gateway NATs with its own addresses and conntrackd must not sync."""
    try:
        local = snapshot.cluster(snapshot.local_cluster).cidrs
    except KeyError:  # without our own cluster's CIDRs overlaps cannot be told: ignore nothing more (as before)
        return []
    return sorted({n for c in snapshot.remote_clusters for n in c.cidrs if not any(n.overlaps(m) for m in local)})


class EgressHANode:
    """keepalived + conntrackd + agent for ``node`` (underlay ``interface``/``ip``) in ``netns``."""

    def __init__(
        self,
        node: str,
        *,
        interface: str,
        ip: IPv4Address,
        netns: str | None,
        workdir: Path,
        on_holder_change: HolderCallback | None = None,
    ) -> None:
        self.node = node
        self.interface = interface
        self.ip = ip
        workdir.mkdir(parents=True, exist_ok=True)
        self.keepalived = Keepalived(workdir / "keepalived", netns)
        self.conntrackd = Conntrackd(workdir / "conntrackd", netns)
        self.lock = AgentLock(str(workdir / "agent.lock"))
        self.agent = EgressHA(node, conntrackd=self.conntrackd, on_holder_change=on_holder_change)
        self._ctd_text = ""
        self._ka_started = False  # a later "started" means keepalived had died
        self._task: asyncio.Task[None] | None = None

    def _conntrackd_text(self, egress: EgressGateway, node_ips: Mapping[str, IPv4Address],
                         inter_cluster: Sequence[IPv4Network]) -> str:  # fmt: skip
        mine = [v for v in egress.vips if self.node in v.candidates]
        peers = sorted({node_ips[c] for v in mine for c in v.candidates if c != self.node and c in node_ips})
        if not egress.config.conntrack_sync or not peers:
            return ""
        ctd = self.conntrackd
        node = ConntrackdNode(interface=self.interface, ip=self.ip, peers=tuple(peers), socket=str(ctd.socket),
                              lock_file=str(ctd.lock_file), log_file=str(ctd.log))  # fmt: skip
        return render_conntrackd(node, ignore=[*(v.vip for v in egress.vips), *inter_cluster])

    def apply(self, egress: EgressGateway, node_ips: Mapping[str, IPv4Address],
              inter_cluster: Sequence[IPv4Network] = ()) -> None:  # fmt: skip
        """Make keepalived and conntrackd match ``egress`` (blocking; call it from a worker thread).
        ``inter_cluster``: the remote clusters' CIDRs, whose flows conntrackd does not sync (``inter_cluster()``)."""
        self.lock.acquire()
        ctd_text = self._conntrackd_text(egress, node_ips, inter_cluster)
        restarted = ctd_text != self._ctd_text or bool(ctd_text and not self.conntrackd.running())
        if restarted:
            if ctd_text == self._ctd_text:
                log.warning("egress_ha.conntrackd_died", node=self.node)
            self.conntrackd.stop()
            if ctd_text:
                self.conntrackd.start(ctd_text)
                if self.agent.masters():
                    self.conntrackd.steps(("-R", "-B"))
            self._ctd_text = ctd_text
        self.agent.conntrackd = self.conntrackd if ctd_text else None
        self.agent.vip_addresses = tuple(sorted({v.vip for v in egress.vips}))
        if not any(self.node in v.candidates for v in egress.vips):
            self.keepalived.stop()
            self._ka_started = False
            return
        ka_node = KeepalivedNode(name=self.node, interface=self.interface, ip=self.ip, fifo=str(self.keepalived.fifo),
                                 check=AgentCheck(lock_file=self.lock.path))  # fmt: skip
        result = self.keepalived.apply(render_keepalived(ka_node, egress.vips, node_ips, egress.config))
        if result == "started" and self._ka_started:
            log.warning("egress_ha.keepalived_died", node=self.node)
        self._ka_started = self._ka_started or result == "started"
        # the agent applies its last snapshot again every few seconds (supervision): quiet when nothing changed
        report = log.debug if result == "unchanged" and not restarted else log.info
        report("egress_ha.applied", node=self.node, keepalived=result, conntrackd=bool(ctd_text))

    def start_listening(self) -> asyncio.Task[None]:
        """Start the agent's FIFO reader (before keepalived starts is fine: the FIFO keeps early lines)."""
        self.keepalived.workdir.mkdir(parents=True, exist_ok=True)
        if self._task is None:
            self._task = asyncio.create_task(self.agent.run(str(self.keepalived.fifo)), name=f"egress-ha-{self.node}")
        return self._task

    async def stop(self) -> None:
        """Stop listening, then keepalived (its STOP is not needed any more), conntrackd; release the lock."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.to_thread(self.keepalived.stop)
        await asyncio.to_thread(self.conntrackd.stop)
        self.lock.release()
