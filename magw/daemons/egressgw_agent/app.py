"""``magw-egress-agent``: one node's egress gateway HA (docs/egress-ha.md), fed by the file broker (``--source file``)
or the Kubernetes API (``--source kube``: read only, ``magw.sources.kube.egressgw_watch``).

On every node that may hold a VIP it keeps keepalived (one VRRPv3 instance per VIP the node is a candidate of)
and conntrackd (FTFW with the other candidates) in line with the broker's ``EgressVIP``/``EgressConfig``
(``magw.daemons.egressgw_agent.node``), serves the seed's status endpoint (``GET /status``: is this node master of
each VIP, since when), and reports every change of holder to the egress controller (``POST /master_notify``
on its API, ``magw-egress``), which writes the VIP's status. A node that is a candidate of no VIP runs neither
daemon and only serves its (empty) status.

The datapath does not wait for any of this: the route agent programs every node's steering and every
candidate's SNAT/DNAT rules whoever holds the VIP (docs/egress-gateway.md), so the gratuitous ARP keepalived
sends when a VIP moves is what moves the traffic. The report is for status and for what must be told.

A report that fails (the controller is down) is logged and retried with a capped backoff until it is
delivered or superseded by a newer state of the same VIP: the last state always wins.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
from collections.abc import AsyncIterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from magw.daemons.egressgw_agent.node import EgressHANode, inter_cluster
from magw.daemons.egressgw_agent.status_http import serve
from magw.model import Snapshot
from magw.sources.file.broker import FileBroker
from magw.sources.kube.egressgw_watch import kube_snapshots

log = structlog.get_logger(__name__)

RETRY_FIRST = 0.2
RETRY_MAX = 5.0
REPORT_TIMEOUT = 5.0
SUPERVISE_INTERVAL = 5.0  # seconds without a new snapshot before keepalived and conntrackd are checked again


class Reporter:
    """Delivers holder reports to the controller, latest state per VIP, retrying in the background."""

    def __init__(
        self,
        node: str,
        *,
        socket: str | None,
        url: str | None,
        token_file: str | None = None,
        ca_file: str | None = None,
    ) -> None:
        self.node = node
        self.socket = socket
        # Over TCP (magw-egress --listen with auth): the bearer token, read again for every report (a projected
        # ServiceAccount token is rotated in place), and the CA that must have signed the server's certificate
        # (None: the system's trust store; https is always verified).
        self.token_file = token_file
        self.ssl: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
        self.enabled = socket is not None or url is not None
        # Over a unix socket the host part is only the request's Host header.
        self.url = (url or "http://magw-egress").rstrip("/")
        self._tasks: dict[str, asyncio.Task[None]] = {}

    async def report(self, vip: str, master: bool, since: str) -> None:
        if not self.enabled:
            return  # no controller configured: the status endpoint is the only report
        old = self._tasks.pop(vip, None)
        if old is not None:
            old.cancel()  # superseded: the newer state is the one to deliver
        body = {"vip": vip, "node": self.node, "state": "MASTER" if master else "BACKUP"}
        self._tasks[vip] = asyncio.create_task(self._deliver(body, since), name=f"egress-report-{vip}")

    async def _deliver(self, body: dict[str, str], since: str) -> None:
        delay = RETRY_FIRST
        while True:
            try:
                connector = aiohttp.UnixConnector(path=self.socket) if self.socket else None
                timeout = aiohttp.ClientTimeout(total=REPORT_TIMEOUT)
                headers = {}
                if self.token_file:
                    headers["Authorization"] = "Bearer " + Path(self.token_file).read_text(encoding="utf-8").strip()
                async with (
                    aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
                    session.post(f"{self.url}/master_notify", json=body, headers=headers, ssl=self.ssl) as resp,
                ):
                    text = (await resp.text()).strip()
                    if resp.status < 300:
                        log.info("egress_agent.reported", **body, since=since)
                        return
                    if 400 <= resp.status < 500:  # refused: retrying the same report cannot help
                        log.error("egress_agent.report_refused", **body, status=resp.status, answer=text[:300])
                        return
                    raise OSError(f"HTTP {resp.status}: {text[:200]}")
            except (OSError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("egress_agent.report_failed", **body, error=str(exc), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)


def _node_ips(snapshot: Snapshot) -> dict[str, IPv4Address]:
    return {n.name: n.ip for n in snapshot.nodes}


async def _follow(
    args: argparse.Namespace, snapshots: AsyncIterator[Snapshot | None], reporter: Reporter, stop: asyncio.Event
) -> None:
    ha: EgressHANode | None = None
    runner: Any = None
    last: Snapshot | None = None
    pending: asyncio.Task[Snapshot | None] | None = None
    try:
        while True:
            # Every SUPERVISE_INTERVAL without a new snapshot, the last one is applied again: apply is level-driven,
            # so a keepalived or conntrackd that died (SIGKILL, OOM) is started again (found by the soak).
            if pending is None:
                pending = asyncio.ensure_future(anext(snapshots))
            done, _ = await asyncio.wait({pending}, timeout=SUPERVISE_INTERVAL)
            if done:
                try:
                    snap = pending.result()
                except StopAsyncIteration:
                    return
                finally:
                    pending = None
            elif ha is not None and last is not None:
                snap = last
            else:
                continue
            if stop.is_set():
                return
            if snap is None:
                continue
            last = snap
            ips = _node_ips(snap)
            if args.node not in ips:
                log.warning("egress_agent.no_node", node=args.node, reason="no Node document of this node yet")
                continue
            if ha is None:
                ha = EgressHANode(
                    args.node, interface=args.interface, ip=ips[args.node], netns=None, workdir=Path(args.workdir),
                    on_holder_change=reporter.report,
                )  # fmt: skip
                ha.start_listening()
                host, _, port = args.status_listen.rpartition(":")
                runner = await serve(ha.agent, host=host or "0.0.0.0", port=int(port))
                log.info("egress_agent.serving", node=args.node, status=args.status_listen)
            try:
                await asyncio.to_thread(ha.apply, snap.egressgw, ips, inter_cluster(snap))
            except Exception as exc:  # one bad apply must not end the agent; the next change retries
                log.error("egress_agent.apply_failed", node=args.node, error=str(exc))
    finally:
        if pending is not None:
            pending.cancel()
        if ha is not None:
            await ha.stop()
        if runner is not None:
            await runner.cleanup()


async def run(args: argparse.Namespace, stop: asyncio.Event) -> None:
    if args.source == "kube":
        snapshots = kube_snapshots(args.kubeconfig, cluster=args.cluster, namespace=args.namespace)
    else:
        snapshots = FileBroker(args.broker_dir, local_cluster=args.cluster).watch()
    reporter = Reporter(
        args.node,
        socket=args.controller_socket,
        url=args.controller_url,
        token_file=getattr(args, "token_file", None),
        ca_file=getattr(args, "controller_ca_file", None),
    )
    follow = asyncio.create_task(_follow(args, snapshots, reporter, stop))
    stopped = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait({follow, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if follow in done:
            follow.result()
    finally:
        for task in (follow, stopped):
            task.cancel()
        await asyncio.gather(follow, stopped, return_exceptions=True)
        await reporter.close()
