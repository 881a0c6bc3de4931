"""``magw-egress``: flags, the source, signals (docs/daemons.md, docs/egress-gateway.md)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence

import structlog

from magw.daemons.common.flags import (
    EXIT_FAILURE,
    OneLineParser,
    add_log_arguments,
    add_version,
    host_port,
    in_existing_directory,
    name,
    parse,
    positive_seconds,
)
from magw.daemons.egressgw.app import run
from magw.sources.flags import add_source_arguments
from magw.util.logsetup import configure_logging

log = structlog.get_logger(__name__)


def parser() -> OneLineParser:
    p = OneLineParser(prog="magw-egress", description="The egress gateway controller and its HTTP API.")
    add_version(p)
    add_source_arguments(p)
    p.add_argument("--cluster", required=True, type=name, help="the local cluster's id")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--socket", type=in_existing_directory, metavar="PATH", help="serve the API on this unix socket"
    )
    where.add_argument(
        "--listen", type=host_port, metavar="HOST:PORT", help="serve the API on this address (port 0: any)"
    )
    p.add_argument(
        "--interval", type=positive_seconds, default=1.0, metavar="SECONDS", help="seconds between passes (default 1)"
    )
    add_log_arguments(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(parser(), argv)
    configure_logging(args.log_format, args.log_level)

    async def body() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await run(args, stop)

    try:
        return asyncio.run(body())
    except OSError as exc:  # e.g. the port is taken, or the socket's path is
        log.error("egress.failed", error=str(exc))
        return EXIT_FAILURE



if __name__ == "__main__":
    sys.exit(main())
