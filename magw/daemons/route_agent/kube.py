"""``magw-route-agent --source kube``: the route agent fed by the local cluster's API server.

The same ``RouteAgent`` as with the file broker, over a ``KubeSource``; beside it the ``CniAnnotator`` keeps this
Node's ``submariner.io/cniIfaceIp`` annotation true. The API server being unreachable changes nothing in the
kernel: the source keeps its last snapshot (nothing is flushed), the health monitor keeps probing and failing
over, and the reflectors retry with capped backoff, logging each change of state.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

import structlog
from prometheus_client import REGISTRY

from magw.daemons.common.flags import EXIT_FAILURE
from magw.daemons.common.runner import run_until_signalled, start_metrics
from magw.daemons.route_agent.app import RouteAgent
from magw.sources.kube.annotator import CniAnnotator
from magw.sources.kube.client import KubeConfigError, api_client
from magw.sources.kube.source import KubeSource

log = structlog.get_logger(__name__)

ONCE_TIMEOUT = 30.0  # --once: seconds to wait for the first complete list of every input


async def run_kube(args: argparse.Namespace, build: Callable[[KubeSource], RouteAgent]) -> int:
    try:
        api = await api_client(args.kubeconfig)
    except KubeConfigError as exc:
        log.error("route_agent.failed", error=str(exc))
        return EXIT_FAILURE
    try:
        # --egress: the egress gateway's objects and the workloads (opt-in: a CRD that is not installed would keep
        # the source from ever completing its first list)
        source = KubeSource(api, local_cluster=args.cluster, namespace=args.namespace, egressgw=args.egress)
        agent = build(source)
        annotator = CniAnnotator(source, api, args.node, interface=args.cni_interface)
        log.info("route_agent.started", node=args.node, cluster=args.cluster, source="kube", once=args.once)
        if args.once:
            return await _once(source, annotator, agent)
        start_metrics(args.metrics_port, registry=REGISTRY, address=args.metrics_address)

        async def work(stop: asyncio.Event) -> int:
            task = asyncio.create_task(annotator.run(stop), name="cni-annotator")
            try:
                return await agent.serve(stop)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        return await run_until_signalled("route_agent", work)
    finally:
        await api.close()


async def _once(source: KubeSource, annotator: CniAnnotator, agent: RouteAgent) -> int:
    task = asyncio.create_task(source.run(), name="source")
    try:
        if not await source.wait_synced(ONCE_TIMEOUT):
            log.error("route_agent.not_ready", reason=f"the API server's lists did not complete in {ONCE_TIMEOUT} s")
            return EXIT_FAILURE
        await annotator.check()
        return await agent.once()
    finally:
        source.stop()
        await asyncio.gather(task, return_exceptions=True)
