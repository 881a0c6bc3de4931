"""``magw-egress``: the egress controller over a file broker directory (``--source file``) or the Kubernetes
API (``--source kube``, ``kube_daemon``), with the seed's HTTP API.

One process per cluster: passes (``EgressController.run``) every ``--interval`` seconds and after every API
change, and the API on ``--socket PATH`` or ``--listen HOST:PORT``. It takes no lease yet: run one replica
(two would both write the same statuses, which is harmless, and both accept API changes, which may race).
SIGTERM/SIGINT stop it cleanly. docs/egress-gateway.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

import structlog
from aiohttp import web

from magw.controllers.egressgw.controller import EgressController
from magw.daemons.egressgw.api import serve
from magw.daemons.egressgw.auth import KubeAuth
from magw.daemons.egressgw.tls import server_context
from magw.sources.file.broker import FileBroker
from magw.sources.file.egressgw_store import EgressStore

log = structlog.get_logger(__name__)


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


async def run(args: argparse.Namespace, stop: asyncio.Event) -> int:
    """Serve until ``stop`` is set."""
    if args.source == "kube":
        from magw.daemons.egressgw.kube import run_kube

        return await run_kube(args, stop)
    broker = FileBroker(args.broker_dir, local_cluster=args.cluster)
    controller = EgressController(source=broker, store=EgressStore(args.broker_dir, args.cluster))
    runner, url = await serve_from_flags(controller, args)
    log.info("egress.serving", url=url, cluster=args.cluster, broker=str(args.broker_dir))
    passes = asyncio.create_task(controller.run(args.interval))
    try:
        await stop.wait()
    finally:
        passes.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await passes
        await runner.cleanup()
    return 0
