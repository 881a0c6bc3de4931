"""``magw-globalnet``: flags, the source, signals (docs/daemons.md, docs/globalnet.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from collections.abc import Sequence

import structlog
from prometheus_client import REGISTRY

from magw.daemons.common.flags import (
    OneLineParser,
    add_log_arguments,
    add_metrics_argument,
    add_version,
    name,
    non_negative_seconds,
    parse,
    positive_seconds,
)
from magw.daemons.common.runner import start_metrics
from magw.daemons.globalnet.app import Daemon
from magw.sources.flags import add_source_arguments
from magw.util.logsetup import configure_logging

log = structlog.get_logger(__name__)


def parser() -> OneLineParser:
    p = OneLineParser(
        prog="magw-globalnet",
        description="The Globalnet controller: allocates global IPs and writes statuses into the file broker "
        "(docs/globalnet.md). One replica acts; others wait on the lease.",
    )
    add_version(p)
    add_source_arguments(p)
    p.add_argument("--cluster", required=True, type=name, help="the id of the local cluster (its Cluster document)")
    p.add_argument(
        "--identity",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="this replica's name in the lease (default: HOSTNAME-PID)",
    )
    p.add_argument(
        "--lease-duration",
        type=positive_seconds,
        default=6.0,
        metavar="SECONDS",
        help="seconds a lease lasts unrenewed (default 6)",
    )
    p.add_argument(
        "--gateway-grace",
        type=non_negative_seconds,
        default=300.0,
        metavar="SECONDS",
        help="seconds a gone gateway keeps its egress addresses before they return to the pool (default 300)",
    )
    p.add_argument(
        "--resync",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="seconds between passes with no change (default 10)",
    )
    p.add_argument(
        "--poll-interval",
        type=positive_seconds,
        default=0.1,
        metavar="SECONDS",
        help="seconds between broker scans where inotify is not available; with --source kube, how long a "
        "burst of changes is gathered into one pass (default 0.1)",
    )
    add_log_arguments(p)
    add_metrics_argument(p)
    return p


async def _main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("globalnet.start", cluster=args.cluster, source=args.source, identity=args.identity)
    start_metrics(args.metrics_port, registry=REGISTRY, address=args.metrics_address)
    if args.source == "kube":
        from magw.daemons.globalnet.kube import run_kube

        return await run_kube(args, stop)
    return await Daemon(args, registry=REGISTRY).run(stop)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(parser(), argv)
    configure_logging(args.log_format, args.log_level)
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())

