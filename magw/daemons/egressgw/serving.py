"""Where ``magw-egress`` serves its API, from its flags (shared by the file broker's ``app`` and ``kube``)."""

from __future__ import annotations

import argparse

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry

from magw.controllers.egressgw.controller import EgressController
from magw.daemons.common.runner import start_metrics
from magw.daemons.egressgw.api import serve
from magw.daemons.egressgw.auth import KubeAuth
from magw.daemons.egressgw.tls import server_context
from magw.metrics.egress import EgressMetrics


async def serve_from_flags(
    controller: EgressController, args: argparse.Namespace, auth: KubeAuth | None = None
) -> tuple[web.AppRunner, str]:
    """The API where the flags say: the unix socket (its mode the access control), or TCP with TLS and ``auth``
    (None only with the insecure flag; main() has refused every other combination)."""
    if args.socket is not None:
        group = getattr(args, "socket_group", None)
        return await serve(
            controller, socket_path=args.socket, socket_mode=0o660 if group is not None else 0o600, socket_group=group
        )
    cert, key = getattr(args, "tls_cert_file", None), getattr(args, "tls_key_file", None)
    context = server_context(cert, key) if cert and key else None
    host, _, port = args.listen.rpartition(":")
    namespace = getattr(args, "namespace", "")
    return await serve(
        controller, host=host or "127.0.0.1", port=int(port), auth=auth, vip_namespace=namespace, ssl_context=context
    )


def serve_metrics(args: argparse.Namespace, controller: EgressController) -> None:
    """The controller's metrics, served on ``--metrics-port`` (0: counted in a registry of their own, unserved, so
    two controllers in one process, as in the tests, do not collide)."""
    port = getattr(args, "metrics_port", 0)
    EgressMetrics(REGISTRY if port else CollectorRegistry(), controller)
    start_metrics(port, registry=REGISTRY, address=getattr(args, "metrics_address", "127.0.0.1"))
