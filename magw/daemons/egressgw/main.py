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
    add_metrics_argument,
    add_version,
    host_port,
    in_existing_directory,
    name,
    parse,
    positive_seconds,
)
from magw.daemons.egressgw.app import run
from magw.daemons.egressgw.tls import DEFAULT_AGENT_SA, INSECURE_FLAG, group_id, serving_problem
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
    p.add_argument("--socket-group", type=group_id, metavar="GROUP",
                   help="--socket: make the socket 0660 and of this group (default: 0600, its owner only)")  # fmt: skip
    p.add_argument("--tls-cert-file", metavar="PATH", help="--listen: the server's certificate chain (PEM)")
    p.add_argument("--tls-key-file", metavar="PATH", help="--listen: the server's private key (PEM)")
    p.add_argument(INSECURE_FLAG, action="store_true",
                   help="--listen without TLS and without any authentication: whoever reaches the port may bind, "
                   "unbind and report any VIP (tests and throwaway labs only)")  # fmt: skip
    p.add_argument("--agent-identity", action="append", default=[], metavar="USER",
                   help="a user allowed to POST /master_notify (repeatable; default "
                   f"system:serviceaccount:NAMESPACE:{DEFAULT_AGENT_SA})")  # fmt: skip
    p.add_argument("--auth-cache-ttl", type=positive_seconds, default=10.0, metavar="SECONDS",
                   help="seconds a TokenReview or SubjectAccessReview answer is reused (default 10)")  # fmt: skip
    p.add_argument(
        "--interval", type=positive_seconds, default=1.0, metavar="SECONDS", help="seconds between passes (default 1)"
    )
    add_log_arguments(p)
    add_metrics_argument(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = parse(p, argv)
    problem = serving_problem(args)
    if problem is not None:
        p.error(problem)
    configure_logging(args.log_format, args.log_level)
    if args.insecure_unauthenticated_http:
        log.warning("egress.insecure", message=f"{INSECURE_FLAG}: the API has no TLS and no authentication")

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
