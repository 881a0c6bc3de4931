"""The route agent's part of ``--source kube``: keep this Node's ``submariner.io/cniIfaceIp`` annotation true.

Every ``interval`` seconds, and at once after each change of the source, the agent looks up its CNI address
locally (``magw.sources.kube.annotate``) and patches its Node when the annotation differs. Until the
annotation is there this node is not in anyone's snapshot (``mapping.node_docs`` refuses a Node without it),
so this runs before, and independently of, the reconciler. API errors are logged once per change and
retried with capped backoff; they never stop the agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from ipaddress import IPv4Address

import structlog
from kubernetes_asyncio.client import ApiClient

from magw.drivers.netlink.local import local_addresses
from magw.sources.kube.annotate import annotation_of, pick_cni_ip, publish_cni_ip
from magw.sources.kube.reflector import API_ERRORS
from magw.sources.kube.source import KubeSource
from magw.util.aio import wait_first

log = structlog.get_logger(__name__)

BACKOFF_FIRST, BACKOFF_MAX = 0.2, 10.0
Addresses = Callable[[], list[tuple[str, IPv4Address]]]


class CniAnnotator:
    def __init__(
        self,
        source: KubeSource,
        api: ApiClient,
        node: str,
        *,
        interface: str | None = None,
        interval: float = 10.0,
        addresses: Addresses = local_addresses,
    ) -> None:
        self.source, self.api, self.node = source, api, node
        self.interface, self.interval = interface, interval
        self._addresses = addresses
        self._wake = asyncio.Event()
        self._logged: str | None = None
        self.patches = 0
        source.subscribe(lambda _snapshot: self._wake.set())

    async def wanted(self) -> IPv4Address | None:
        """The address to publish: needs the local Cluster (its pod CIDRs) unless ``interface`` is given."""
        snapshot = self.source.snapshot
        cidrs = snapshot.cluster(snapshot.local_cluster).pod_cidrs if snapshot is not None else ()
        if not cidrs and self.interface is None:
            return None
        # in a thread: pyroute2's IPRoute runs an event loop of its own, which cannot start inside ours
        return pick_cni_ip(await asyncio.to_thread(self._addresses), cidrs, self.interface)

    def _say(self, event: str, **fields: object) -> None:
        state = f"{event} {fields}"
        if state != self._logged:
            (log.warning if event.endswith(("failed", "missing")) else log.info)(event, node=self.node, **fields)
        self._logged = state

    async def check(self) -> bool:
        """One look; True when the annotation is right (or was just made right)."""
        want = await self.wanted()
        if want is None:
            where = f"interface {self.interface}" if self.interface else "the local cluster's pod CIDRs"
            self._say("route_agent.cni_ip_missing", reason=f"no IPv4 address in {where} here yet")
            return False
        node = self.source.objects("Node").get(("", self.node))
        if node is None and self.source.reflectors["Node"].synced:
            self._say("route_agent.cni_ip_missing", reason=f"no Node object named {self.node}")
            return False
        if annotation_of(node) == str(want):
            return True
        await publish_cni_ip(self.api, self.node, want)
        self.patches += 1
        self._say("route_agent.cni_ip_published", address=str(want), before=annotation_of(node))
        return True

    async def run(self, stop: asyncio.Event) -> None:
        backoff = BACKOFF_FIRST
        while not stop.is_set():
            self._wake.clear()
            delay = self.interval
            try:
                await self.check()
                backoff = BACKOFF_FIRST
            except API_ERRORS as exc:
                self._say("route_agent.cni_ip_failed", error=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
                delay, backoff = backoff, min(backoff * 2, BACKOFF_MAX)
            except Exception as exc:  # a bug here must not end the annotations silently: log it, keep trying
                log.exception("route_agent.cni_ip_bug", node=self.node, error=repr(exc))
                delay, backoff = backoff, min(backoff * 2, BACKOFF_MAX)
            await wait_first(stop, self._wake, delay)
