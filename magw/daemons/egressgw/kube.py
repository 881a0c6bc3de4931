"""``magw-egress --source kube``: the egress controller and its HTTP API over the Kubernetes API.

Reads come from ``KubeSource`` with ``egressgw=True`` (EgressConfig ``default`` and the EgressVIPs of
``--namespace``, and the Namespaces, Pods, Services and EndpointSlices the bindings resolve against), seen
through ``KubeEgressView`` (the controller's own writes until the watch brings them back). Writes go through
``KubeEgressStore``: statuses as merge patches of the status subresource, API bind/unbind as merge patches of
``spec.bindings`` with the resourceVersion last seen as a precondition. The controller and the API are the file
broker's (``EgressController``, ``magw.daemons.egressgw.api``). No lease, as with the file broker: one replica.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

import structlog
from kubernetes_asyncio.client import ApiClient

from magw.controllers.egressgw.controller import EgressController
from magw.daemons.egressgw.auth import KubeAuth
from magw.daemons.egressgw.reviews import KubeReviewer
from magw.daemons.egressgw.serving import serve_from_flags, serve_metrics
from magw.daemons.egressgw.tls import DEFAULT_AGENT_SA
from magw.sources.kube.client import KubeConfigError, api_client
from magw.sources.kube.egressgw_store import ApiThread, KubeEgressStore
from magw.sources.kube.egressgw_view import KubeEgressView
from magw.sources.kube.source import KubeSource

SA_PREFIX = "system:serviceaccount:"
log = structlog.get_logger(__name__)


def kube_controller(args: argparse.Namespace, api: ApiClient, thread: ApiThread) -> tuple[EgressController, KubeSource]:
    """The controller over ``api`` (reads) and ``thread`` (writes), and the source to run."""
    source = KubeSource(api, local_cluster=args.cluster, namespace=args.namespace, globalnet=False, egressgw=True)
    views: list[KubeEgressView] = []
    store = KubeEgressStore(thread, namespace=args.namespace, seen=lambda name: views[0].seen(name))
    views.append(KubeEgressView(source, store))
    return EgressController(source=views[0], store=store), source


async def run_kube(args: argparse.Namespace, stop: asyncio.Event) -> int:
    """Serve until ``stop`` is set; 1 when the API cannot be reached at all (no kubeconfig)."""
    try:
        api = await api_client(args.kubeconfig)
    except KubeConfigError as exc:
        log.error("egress.failed", error=str(exc))
        return 1
    try:
        thread = await asyncio.to_thread(ApiThread, args.kubeconfig)
    except BaseException:
        await api.close()
        raise
    try:
        controller, source = kube_controller(args, api, thread)
        serve_metrics(args, controller)
        auth = None
        if args.listen is not None and not getattr(args, "insecure_unauthenticated_http", False):
            agents = getattr(args, "agent_identity", None) or [f"{SA_PREFIX}{args.namespace}:{DEFAULT_AGENT_SA}"]
            ttl = getattr(args, "auth_cache_ttl", 10.0)
            auth = KubeAuth(KubeReviewer(api), agent_users=agents, ttl=ttl)
        runner, url = await serve_from_flags(controller, args, auth)
        log.info("egress.serving", url=url, cluster=args.cluster, source="kube", namespace=args.namespace)
        tasks = [asyncio.create_task(source.run(), name="source"), asyncio.create_task(controller.run(args.interval))]
        source.subscribe(lambda _snapshot: controller.mark_dirty("snapshot"))
        try:
            await stop.wait()
        finally:
            source.stop()
            tasks[1].cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await runner.cleanup()
    finally:
        await asyncio.to_thread(thread.close)
        await api.close()
    return 0
