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

from magw.daemons.globalnet.app import Daemon
from magw.sources.flags import add_source_arguments, check_source
from magw.util.logsetup import configure_logging

log = structlog.get_logger(__name__)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="magw-globalnet",
        description="The Globalnet controller: allocates global IPs and writes statuses into the file broker "
        "(docs/globalnet.md). One replica acts; others wait on the lease.",
    )
    add_source_arguments(p)
    p.add_argument("--cluster", required=True, help="the id of the local cluster (its Cluster document)")
    p.add_argument(
        "--identity",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="this replica's name in the lease (default: HOSTNAME-PID)",
    )
    p.add_argument("--lease-duration", type=float, default=6.0, help="seconds a lease lasts unrenewed (default 6)")
    p.add_argument(
        "--gateway-grace",
        type=float,
        default=300.0,
        help="seconds a gone gateway keeps its egress addresses before they return to the pool (default 300)",
    )
    p.add_argument("--resync", type=float, default=10.0, help="seconds between passes with no change (default 10)")
    p.add_argument("--poll-interval", type=float, default=0.1, help="seconds between broker scans (default 0.1)")
    p.add_argument("--log-format", choices=("console", "json"), default="console")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return p


def _positive(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name in ("lease_duration", "resync", "poll_interval"):
        if not getattr(args, name) > 0:
            p.error(f"--{name.replace('_', '-')}: must be > 0 seconds")
    if args.gateway_grace < 0:
        p.error("--gateway-grace: must be >= 0 seconds")


async def _main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("globalnet.start", cluster=args.cluster, source=args.source, identity=args.identity)
    if args.source == "kube":
        from magw.daemons.globalnet.kube import run_kube

        return await run_kube(args, stop)
    return await Daemon(args).run(stop)


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    _positive(p, args)
    check_source(p, args)
    configure_logging(args.log_format, args.log_level)
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())

