"""``magw-gateway``: flags, the source, signals (docs/daemons.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Sequence

import structlog
from prometheus_client import REGISTRY

from magw.daemons.common.cable import CableKeys, add_state_dir_argument
from magw.daemons.common.flags import (
    EXIT_FAILURE,
    OneLineParser,
    common_parser,
    ipv4,
    non_negative_seconds,
    parse,
    positive_seconds,
    udp_port,
)
from magw.daemons.common.runner import run_until_signalled, start_metrics
from magw.daemons.gateway.app import DEFAULT_EXIT_HOLD, Gateway
from magw.daemons.route_agent.health_flags import add_heartbeat_argument
from magw.sources.file.broker import FileBroker
from magw.util.logsetup import configure_logging

log = structlog.get_logger(__name__)


def build_parser() -> OneLineParser:
    p = common_parser(
        "magw-gateway", "Publish this gateway node's Endpoint (file broker document or Kubernetes object).", broker=True
    )
    p.add_argument("--private-ip", type=ipv4, help="address inside the cluster (default: the Node document's ip)")
    p.add_argument(
        "--public-ip",
        type=ipv4,
        help="address other clusters tunnel to (default: the Node document's public_ip, else the private IP)",
    )
    p.add_argument(
        "--public-port",
        type=udp_port,
        help="port other clusters send the cable to on the public IP, when a load balancer gives this gateway a "
        "port of its own (default: the Node document's public_port, else the cable's port; docs/load-balancer.md)",
    )
    p.add_argument(
        "--nat-source-ip",
        type=ipv4,
        help="the address this gateway's cable packets arrive from at other clusters when a NAT other than the one "
        "holding the public IP translates them (a cloud NAT gateway beside the load balancer): published as "
        "backend_config.natSourceIP so remote gateways admit it (default: none; docs/load-balancer.md)",
    )
    add_heartbeat_argument(p)
    add_state_dir_argument(p)
    p.add_argument(
        "--withdraw-on-exit",
        action="store_true",
        help="remove the Endpoint document on SIGTERM/SIGINT (drain before maintenance; default: keep it, "
        "so a restart moves no flow)",
    )
    p.add_argument(
        "--exit-hold",
        type=non_negative_seconds,
        default=DEFAULT_EXIT_HOLD,
        metavar="SECONDS",
        help=f"file broker: a stop that keeps the Endpoint document dates it SECONDS ahead, so the route agents "
        f"keep it while the gateway restarts (default {DEFAULT_EXIT_HOLD:g}; 0: it ages from its last heartbeat)",
    )
    k = p.add_argument_group("--source kube")
    k.add_argument(
        "--lease-duration",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="the gateway Lease's duration (default 10); failover never waits for it, only the tidy-up does",
    )
    k.add_argument(
        "--tidy-grace",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="delete a gateway's Endpoint once its Lease has been expired this long (default 30)",
    )
    k.add_argument(
        "--health-status-file",
        metavar="PATH",
        help="the route agent's --status-file on this node: connection states and RTTs for the Gateway status",
    )
    k.add_argument(
        "--public-service",
        metavar="NAME",
        help="the LoadBalancer Service in --namespace that fronts this gateway: its status.loadBalancer.ingress "
        "address and its port named magw-<node> (or its only port) are published, re-read every 5 s; "
        "--public-ip/--public-port win; nothing is published until it has an address (docs/load-balancer.md)",
    )
    k.add_argument(
        "--identity",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="this process's name in the Lease (default HOSTNAME-PID)",
    )
    return p


async def _run(args: argparse.Namespace) -> int:
    if args.source == "kube":
        from magw.daemons.gateway.kube import run_kube

        return await run_kube(args)
    gateway = Gateway(
        source=FileBroker(args.broker_dir, local_cluster=args.cluster),
        node=args.node,
        resync_period=args.resync_period,
        private_ip=args.private_ip,
        public_ip=args.public_ip,
        public_port=args.public_port,
        nat_source_ip=args.nat_source_ip,
        heartbeat=args.heartbeat,
        withdraw_on_exit=args.withdraw_on_exit,
        exit_hold=args.exit_hold,
        registry=REGISTRY,
        cable_keys=CableKeys(args.state_dir),
    )
    log.info("gateway.started", node=args.node, cluster=args.cluster, path=gateway.path)
    start_metrics(args.metrics_port, registry=REGISTRY, address=args.metrics_address)
    return await run_until_signalled("gateway", gateway.serve)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(build_parser(), argv)
    configure_logging(args.log_format, args.log_level)
    try:
        return asyncio.run(_run(args))
    except OSError as exc:  # e.g. the metrics port is taken, or the directory is not writable
        log.error("gateway.failed", error=str(exc))
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
