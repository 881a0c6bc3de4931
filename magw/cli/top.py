"""``magw top``: a live view of a lab's gateways (or chosen nodes) and their paths, refreshed every second.

    magw top --lab NAME [--node NAME]... [--interval SECONDS] [--once [--json]]

Per node: tx/rx rates of its tunnels and WAN link, tracked flows, the last failover and what detecting it cost;
per path: state, RTT, the share of the node's flows, since when (docs/show.md). ``q`` quits. ``--once`` prints
one frame (two readings ``--interval`` apart, for the rates) instead of the live screen, for scripts and logs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime

from magw.cli import UsageError
from magw.ops.show.broker_source import SourceError
from magw.ops.show.inputs import Inputs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lab", metavar="NAME", required=True, help="the lab to watch (magw lab up --name NAME)")
    parser.add_argument(
        "--node", metavar="NAME", action="append", default=[], help="watch this node (repeatable; default: gateways)"
    )
    parser.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="time between frames (default %(default)s)"
    )
    parser.add_argument("--once", action="store_true", help="print one frame and exit (no terminal needed)")
    parser.add_argument("--json", action="store_true", help="with --once: the frame as one JSON object")


def run(args: argparse.Namespace) -> int:
    if not args.interval > 0:
        raise UsageError(f"--interval: must be > 0 seconds, got {args.interval}")
    if args.json and not args.once:
        raise UsageError("--json goes with --once (the live screen is for people)")
    from magw.ops.show.lab_source import read_lab  # lazy: magw's other commands do not import the lab
    from magw.ops.top.frame import frame_doc, frame_lines

    nodes = args.node or None

    def read() -> Inputs:
        try:
            return read_lab(args.lab, kernel_nodes=nodes, versions=False)
        except SourceError as exc:
            raise UsageError(str(exc)) from None

    first = read()  # bad input (no such lab or node) fails here, before the screen takes the terminal
    if args.once:
        time.sleep(args.interval)
        doc = frame_doc(first, read(), nodes)
        if args.json:
            sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        else:
            sys.stdout.write("\n".join(frame_lines(doc, datetime.now(UTC))).rstrip() + "\n")
        return 0
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("top: not a terminal (use --once for one frame on stdout)")
    from magw.ops.top.screen import run_screen

    return run_screen(read, nodes, args.interval)
