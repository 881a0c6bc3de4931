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
import signal
import sys
from collections.abc import Sequence

import structlog

from magw.controllers.egress.api import serve
from magw.controllers.egress.controller import EgressController
from magw.logsetup import configure_logging
from magw.sources.egress_store import EgressStore
from magw.sources.filebroker import FileBroker
from magw.sources.flags import add_source_arguments, check_source

log = structlog.get_logger(__name__)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="magw-egress", description="The egress gateway controller and its HTTP API.")
    add_source_arguments(p)
    p.add_argument("--cluster", required=True, help="the local cluster's id")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="serve the API on this unix socket")
    where.add_argument("--listen", metavar="HOST:PORT", help="serve the API on this address (port 0: any)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between passes (default 1)")
    p.add_argument(
        "--log-format", choices=("console", "json"), default="console", help="console or json (default console)"
    )
    p.add_argument("--log-level", default="info", help="debug, info, warning (default info)")
    return p


async def run(args: argparse.Namespace, stop: asyncio.Event) -> int:
    """Serve until ``stop`` is set."""
    if args.source == "kube":
        from magw.controllers.egress.kube_daemon import run_kube

        return await run_kube(args, stop)
    broker = FileBroker(args.broker_dir, local_cluster=args.cluster)
    controller = EgressController(broker=broker, store=EgressStore(args.broker_dir, args.cluster))
    if args.socket is not None:
        runner, url = await serve(controller, socket_path=args.socket)
    else:
        host, _, port = args.listen.rpartition(":")
        runner, url = await serve(controller, host=host or "127.0.0.1", port=int(port))
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


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    check_source(p, args)
    try:
        configure_logging(args.log_format, args.log_level)
    except ValueError as exc:
        print(f"magw-egress: error: {exc}", file=sys.stderr)
        return 2

    async def body() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await run(args, stop)

    return asyncio.run(body())
