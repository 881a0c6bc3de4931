"""``magw-egress``: flags, the source, signals (docs/daemons.md, docs/egress-gateway.md)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

import structlog

from magw.daemons.egressgw.app import run
from magw.sources.flags import add_source_arguments, check_source
from magw.util.logsetup import configure_logging

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



if __name__ == "__main__":
    sys.exit(main())
