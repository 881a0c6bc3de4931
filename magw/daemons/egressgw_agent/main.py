"""``magw-egress-agent``: flags, the source, signals (docs/daemons.md, docs/egress-ha.md)."""

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
    interface_name,
    name,
    parse,
    url,
)
from magw.daemons.egressgw_agent.app import run
from magw.sources.flags import add_source_arguments
from magw.util.logsetup import configure_logging

log = structlog.get_logger(__name__)


def parser() -> OneLineParser:
    p = OneLineParser(prog="magw-egress-agent", description="One node's egress gateway HA.")
    add_version(p)
    add_source_arguments(p)
    p.add_argument("--cluster", required=True, type=name, help="the local cluster's id")
    p.add_argument("--node", required=True, type=name, help="this node's name, as in its Node document")
    p.add_argument("--interface", default="eth0", type=interface_name,
                   help="the underlay interface that carries the VIPs (default eth0)")  # fmt: skip
    p.add_argument("--workdir", required=True, type=in_existing_directory, metavar="DIR",
                   help="a directory of this node's own: configs, sockets, PID files (made if missing; its parent "
                   "must exist)")  # fmt: skip
    p.add_argument("--controller-socket", type=in_existing_directory, metavar="PATH",
                   help="the egress controller's API unix socket (magw-egress --socket)")  # fmt: skip
    p.add_argument("--controller-url", type=url, metavar="URL",
                   help="the egress controller's API base URL (magw-egress --listen)")  # fmt: skip
    p.add_argument("--token-file", metavar="PATH",
                   help="--controller-url: send the bearer token in this file (read for every report; in deploy/ "
                   "the projected ServiceAccount token)")  # fmt: skip
    p.add_argument("--controller-ca-file", metavar="PATH",
                   help="--controller-url https: the CA that signed magw-egress's certificate (default: the "
                   "system's trust store)")  # fmt: skip
    p.add_argument("--status-listen", default="0.0.0.0:9620", type=host_port, metavar="HOST:PORT",
                   help="the status endpoint (default 0.0.0.0:9620)")  # fmt: skip
    add_log_arguments(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = parse(p, argv)
    if args.controller_socket and args.controller_url:
        p.error("--controller-socket and --controller-url: give one")
    configure_logging(args.log_format, args.log_level)

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(args, stop)

    try:
        asyncio.run(_main())
    except OSError as exc:  # e.g. the status port is taken
        log.error("egress_agent.failed", error=str(exc))
        return EXIT_FAILURE
    return 0



if __name__ == "__main__":
    sys.exit(main())
