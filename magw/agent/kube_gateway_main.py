"""Starting ``magw-gateway --source kube``: API clients for the local cluster and the broker, then ``KubeGateway``."""

from __future__ import annotations

import argparse
import contextlib

import structlog
from prometheus_client import REGISTRY

from magw.agent.kube_gateway import KubeGateway
from magw.agent.options import EXIT_FAILURE
from magw.agent.runner import run_until_signalled, start_metrics
from magw.sources.kube.brokersync import BrokerSync
from magw.sources.kube.client import KubeConfigError, api_client
from magw.sources.kube.source import KubeSource

log = structlog.get_logger(__name__)


async def run_kube(args: argparse.Namespace) -> int:
    async with contextlib.AsyncExitStack() as stack:
        try:
            api = await api_client(args.kubeconfig)
            stack.push_async_callback(api.close)
            broker = None
            if args.broker_kubeconfig:
                broker_api = await api_client(args.broker_kubeconfig)
                stack.push_async_callback(broker_api.close)
                broker = BrokerSync(
                    api,
                    broker_api,
                    local_cluster=args.cluster,
                    namespace=args.namespace,
                    broker_namespace=args.broker_namespace,
                    resync=args.resync_period,
                )
        except KubeConfigError as exc:
            log.error("gateway.failed", error=str(exc))
            return EXIT_FAILURE
        gateway = KubeGateway(
            # no workloads: the gateway publishes its Globalnet addresses from the egress kinds' statuses only
            source=KubeSource(api, local_cluster=args.cluster, namespace=args.namespace, workloads=False),
            api=api,
            node=args.node,
            namespace=args.namespace,
            identity=args.identity,
            lease_duration=args.lease_duration,
            private_ip=args.private_ip,
            public_ip=args.public_ip,
            broker=broker,
            health_status_file=args.health_status_file,
            tidy_grace=args.tidy_grace,
            withdraw_on_exit=args.withdraw_on_exit,
        )
        log.info("gateway.started", node=args.node, cluster=args.cluster, source="kube", broker=broker is not None)
        start_metrics(args.metrics_port, registry=REGISTRY)
        return await run_until_signalled("gateway", gateway.serve)
    return EXIT_FAILURE  # not reached: the stack does not swallow exceptions
