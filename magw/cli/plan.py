"""``magw plan``: print the desired state of one node, computed from a snapshot file.

Pure: it reads a file and prints; it touches no kernel state and imports no
driver, so it runs anywhere without root.
"""

from __future__ import annotations

import argparse
import json
import sys
from ipaddress import IPv4Address

import attrs
import structlog

from magw.cli import UsageError
from magw.daemons.common.flags import ipv4
from magw.desired.node.planner import plan
from magw.desired.render import render_json, render_text
from magw.desired.state import DesiredState
from magw.model import Snapshot, Strategy
from magw.snapshot.load import load_snapshot, parse_snapshot_text

log = structlog.get_logger("magw.cli.plan")

FORMATS = ("text", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(fast_exit=True)  # magw.cli.main._exit_now: no interpreter teardown after the command
    parser.add_argument(
        "--snapshot", required=True, metavar="FILE", help="the snapshot YAML file (- reads it from stdin)"
    )
    parser.add_argument("--node", required=True, metavar="NAME", help="the node of the local cluster to plan for")
    parser.add_argument(
        "--format", choices=FORMATS, default="text", help="text (close to ip/bridge/nft output) or json (default: text)"
    )
    parser.add_argument(
        "--strategy",
        choices=[s.value for s in Strategy],
        default=None,
        help="override the snapshot's strategy (default: the snapshot's, itself resilient by default)",
    )
    parser.add_argument(
        "--ovn-mgmt-nexthop",
        type=ipv4,
        metavar="IP",
        default=None,
        help="cni ovn: the next hop of ovn-k8s-mp0 for table 150, as the route agent's flag of the same name "
        "(default: the node's cni_ip minus one)",
    )


def run(args: argparse.Namespace) -> int:
    snapshot = _load(args.snapshot)
    if args.strategy is not None:
        snapshot = attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, strategy=Strategy(args.strategy)))
    state = plan_node(snapshot, args.node, ovn_mgmt_nexthop=args.ovn_mgmt_nexthop)
    log.info(
        "cli.plan_done",
        node=args.node,
        strategy=snapshot.config.strategy.value,
        routes=len(state.routes),
        groups=len(state.groups),
    )
    sys.stdout.write(format_state(state, args.format))
    return 0


def _load(path: str) -> Snapshot:
    if path == "-":
        return parse_snapshot_text(sys.stdin.read(), source="<stdin>")
    return load_snapshot(path)


def check_node(snapshot: Snapshot, node: str) -> None:
    """A UsageError unless ``node`` is a node of the snapshot; its message is the one ``plan`` and ``apply`` print."""
    known = [n.name for n in snapshot.nodes]
    if node not in known:
        raise UsageError(f"--node: unknown node {node!r} (known nodes: {', '.join(known) or 'none'})")


def plan_node(snapshot: Snapshot, node: str, *, ovn_mgmt_nexthop: IPv4Address | None = None) -> DesiredState:
    """The plan of ``node``; an unknown node or input the planner refuses is a UsageError."""
    check_node(snapshot, node)
    try:
        return plan(snapshot, node, ovn_mgmt_nexthop=ovn_mgmt_nexthop)
    except ValueError as exc:
        raise UsageError(f"plan: {exc}") from None


def format_state(state: DesiredState, fmt: str) -> str:
    """The text or JSON rendering, ending with a newline."""
    if fmt == "json":
        return json.dumps(render_json(state), indent=2, sort_keys=True) + "\n"
    text = render_text(state)
    return text if text.endswith("\n") else text + "\n"
