"""``magw-egress-agent``: flags, the source, signals (docs/daemons.md, docs/egress-ha.md)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

import structlog

from magw.daemons.egressgw_agent.app import run
from magw.sources.flags import add_source_arguments, check_source
from magw.util.logsetup import configure_logging

log = structlog.get_logger(__name__)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="magw-egress-agent", description="One node's egress gateway HA.")
    add_source_arguments(p)
    p.add_argument("--cluster", required=True, help="the local cluster's id")
    p.add_argument("--node", required=True, help="this node's name, as in its Node document")
    p.add_argument("--interface", default="eth0", help="the underlay interface that carries the VIPs (default eth0)")
    p.add_argument("--workdir", required=True, help="a directory of this node's own: configs, sockets, PID files")
    p.add_argument("--controller-socket", help="the egress controller's API unix socket (magw-egress --socket)")
    p.add_argument("--controller-url", help="the egress controller's API base URL (magw-egress --listen)")
    p.add_argument("--status-listen", default="0.0.0.0:9620", metavar="HOST:PORT",
                   help="the status endpoint (default 0.0.0.0:9620)")  # fmt: skip
    p.add_argument(
        "--log-format", choices=("console", "json"), default="console", help="console or json (default console)"
    )
    p.add_argument("--log-level", default="info", help="debug, info, warning (default info)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    check_source(p, args)
    if args.controller_socket and args.controller_url:
        p.error("--controller-socket and --controller-url: give one")
    _host, sep, port = args.status_listen.rpartition(":")
    if not sep or not port.isdigit():
        p.error(f"--status-listen: {args.status_listen!r} is not HOST:PORT")
    try:
        configure_logging(args.log_format, args.log_level)
    except ValueError as exc:
        print(f"magw-egress-agent: error: {exc}", file=sys.stderr)
        return 2

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(args, stop)

    asyncio.run(_main())
    return 0



if __name__ == "__main__":
    sys.exit(main())
