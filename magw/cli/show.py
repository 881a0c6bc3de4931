"""``magw show TOPIC``: connections, endpoints, gateways, networks, Globalnet, egress VIPs and versions.

    magw show {connections,endpoints,gateways,networks,globalnet,egressgw,versions,all}
              (--lab NAME | --broker-dir DIR | --kubeconfig FILE) [--cluster ID]... [--namespace NS]
              [--node NAME]... [--status-file FILE]... [--endpoint-ttl SECONDS] [--json]

Reads the sources the daemons read (docs/show.md): a lab, a file broker directory, or a cluster's API server.
Read-only. Tables for people, ``--json`` for scripts (one object: ``source`` and one list per topic).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from magw.cli import UsageError
from magw.daemons.route_agent.health_flags import DEFAULT_ENDPOINT_TTL
from magw.ops.show.broker_source import SourceError
from magw.ops.show.inputs import Inputs
from magw.ops.show.report import TOPICS, document, text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", choices=(*TOPICS, "all"), help="what to show (all: every topic)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--lab", metavar="NAME", help="a lab made by magw lab up (its broker or API servers, "
                        "its route agents' status files, its nodes' kernels)")  # fmt: skip
    source.add_argument("--broker-dir", metavar="DIR", help="a file broker directory (every cluster in it)")
    source.add_argument("--kubeconfig", metavar="FILE", help="a cluster's API server (one cluster)")
    parser.add_argument(
        "--cluster",
        metavar="ID",
        action="append",
        default=[],
        help="--broker-dir: only this cluster (repeatable); --kubeconfig: the cluster it is (default: found from "
        "its Nodes' Endpoints)",
    )
    parser.add_argument(
        "--namespace", default="submariner-operator", help="--kubeconfig: magw's namespace (default %(default)s)"
    )
    parser.add_argument(
        "--node",
        metavar="NAME",
        action="append",
        default=[],
        help="connections: this node's paths (repeatable; default: every gateway's)",
    )
    parser.add_argument(
        "--status-file",
        metavar="FILE",
        action="append",
        default=[],
        help="--broker-dir, --kubeconfig: a route agent's status file (its --status-file), for the node's "
        "paths with RTT and since (repeatable)",
    )
    parser.add_argument(
        "--endpoint-ttl",
        type=float,
        default=DEFAULT_ENDPOINT_TTL,
        metavar="SECONDS",
        help="--broker-dir: an Endpoint file not touched for longer is gone, as for the route agents (default "
        "%(default)s; 0: never, for a directory no gateway daemon keeps)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of tables")


def read_inputs(args: argparse.Namespace) -> Inputs:
    """The inputs the flags name; bad input is a ``UsageError`` (one line, exit 2)."""
    try:
        if args.lab is not None:
            if args.cluster or args.status_file:
                raise UsageError("show: --cluster and --status-file go with --broker-dir or --kubeconfig, not --lab")
            from magw.ops.show.lab_source import read_lab  # lazy: only a lab needs the lab's modules

            return read_lab(args.lab, kernel_nodes=args.node or None, flows=args.topic in ("connections", "all"))
        if args.broker_dir is not None:
            from magw.ops.show.broker_source import read_broker

            ttl = args.endpoint_ttl if args.endpoint_ttl > 0 else None
            return read_broker(args.broker_dir, args.cluster, args.status_file, endpoint_ttl=ttl)
        if len(args.cluster) > 1:
            raise UsageError("show: --kubeconfig reads one cluster: give --cluster once")
        from magw.ops.show.kube_source import read_kube  # lazy: kubernetes_asyncio only for this source
        from magw.sources.kube.client import KubeConfigError

        try:
            return read_kube(args.kubeconfig, args.namespace, args.cluster[0] if args.cluster else None,
                             args.status_file)  # fmt: skip
        except KubeConfigError as exc:
            raise UsageError(f"--kubeconfig: {exc}") from None
    except SourceError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    inputs = read_inputs(args)
    known = {n.name for _c, n in inputs.nodes()} | set(inputs.statuses)
    unknown = [n for n in args.node if n not in known]
    if unknown and known:
        raise UsageError(f"--node: no node {', '.join(unknown)} (nodes: {', '.join(sorted(known))})")
    doc = document(inputs, args.topic, args.node or None)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(text(doc, datetime.now(UTC)))
    return 0
