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

from magw.controllers.egressgw.controller import EgressController
from magw.daemons.egressgw.serving import serve_from_flags, serve_metrics
from magw.sources.file.broker import FileBroker
from magw.sources.file.egressgw_store import EgressStore

log = structlog.get_logger(__name__)


async def run(args: argparse.Namespace, stop: asyncio.Event) -> int:
    """Serve until ``stop`` is set."""
    if args.source == "kube":
        from magw.daemons.egressgw.kube import run_kube

        return await run_kube(args, stop)
    broker = FileBroker(args.broker_dir, local_cluster=args.cluster)
    controller = EgressController(source=broker, store=EgressStore(args.broker_dir, args.cluster))
    serve_metrics(args, controller)
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
