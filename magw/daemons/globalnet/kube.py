"""``magw-globalnet --source kube``: the same controller pass over the Kubernetes source.

The lease is the ``coordination.k8s.io/v1`` Lease ``magw-globalnet`` in the namespace (``KubeLease``: released
at once on SIGTERM), held by a background task; a pass runs only while it is held, and every write asks
``holding`` first (``LeaseLost`` otherwise). Reads come from ``KubeSource`` (Pods, Services, EndpointSlices,
Namespaces, ServiceExports, the Globalnet kinds and their statuses); writes go through ``KubeGlobalnetStore``
(merge patches of status subresources; GlobalIngressIPs and per-gateway ClusterGlobalEgressIPs). Between
passes the daemon waits for a change of the source (or ``--resync``), not for a poll interval.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import timedelta

import structlog
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import REGISTRY, CollectorRegistry

from magw.controllers.globalnet.controller import GlobalnetController
from magw.daemons.globalnet.app import Daemon
from magw.sources.kube.client import KubeConfigError, api_client
from magw.sources.kube.globalnet_store import KubeGlobalnetStore
from magw.sources.kube.lease import KubeLease, globalnet_lease_name
from magw.sources.kube.reflector import API_ERRORS
from magw.sources.kube.source import KubeSource

log = structlog.get_logger(__name__)


class KubeDaemon(Daemon):
    def __init__(self, args: argparse.Namespace, api: ApiClient, registry: CollectorRegistry | None = None) -> None:
        self.api = api
        self.source = KubeSource(api, local_cluster=args.cluster, namespace=args.namespace)
        self.kube_lease = KubeLease(api, args.namespace, globalnet_lease_name(), args.identity, args.lease_duration)
        self._hold_stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.source.subscribe(lambda _snapshot: self.trigger.mark_dirty("source"))
        super().__init__(args, registry)

    def _controller(self, args: argparse.Namespace) -> GlobalnetController:
        store = KubeGlobalnetStore(self.api, asyncio.get_running_loop(), cluster=args.cluster, namespace=args.namespace)
        return GlobalnetController(
            source=self.source,
            store=store,
            grace=timedelta(seconds=args.gateway_grace),
            may_write=self.lease_valid,
        )

    def lease_valid(self) -> bool:
        return self.kube_lease.holding

    async def _ensure_lease(self) -> bool:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self.source.run(), name="source"),
                asyncio.create_task(self.kube_lease.hold(self._hold_stop), name="lease"),
            ]
        self.holding = self.kube_lease.holding
        return self.holding

    async def _holder(self) -> str:
        try:
            lease = await CoordinationV1Api(self.api).read_namespaced_lease(globalnet_lease_name(), self.args.namespace)
        except ApiException as exc:
            return "" if exc.status == 404 else f"? ({exc.status})"
        except API_ERRORS as exc:
            return f"? ({type(exc).__name__})"
        return str(lease.spec.holder_identity or "")

    def _follow(self) -> None:
        """The source's task starts with the first look at the lease (``_ensure_lease``)."""

    def _schedule(self) -> tuple[float, float]:
        """A turn when the source changes, ``--poll-interval`` after the first change (a burst of changes: one
        pass), and every ``--resync`` without one."""
        return self.args.resync, self.args.poll_interval

    async def _release(self) -> None:
        self._hold_stop.set()  # hold() releases the Lease on its way out
        self.source.stop()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        log.info("globalnet.lease_released", identity=self.args.identity)


async def run_kube(args: argparse.Namespace, stop: asyncio.Event) -> int:
    try:
        api = await api_client(args.kubeconfig)
    except KubeConfigError as exc:
        log.error("globalnet.failed", error=str(exc))
        return 1
    try:
        return await KubeDaemon(args, api, REGISTRY).run(stop)
    finally:
        await api.close()
