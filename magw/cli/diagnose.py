"""``magw diagnose``: a node check-up, every check with a verdict (pass/warn/fail) and a fix.

    magw diagnose [TOPIC] [--netns NS | --lab NAME [--node N ...]] [--clock-url URL ...] [--kubeconfig PATH]
                  [--json]

TOPIC is ``all`` (default) or one of ``kernel sysctl mtu clock firewall shadow cni stale`` (docs/diagnose.md).
Exit status 1 when any check failed, 0 otherwise (warnings included), 2 for bad input.

``diagnose kernel`` also prints what it always did: what the kernel of the namespace supports (nexthop
objects and resilient groups, probed with throwaway objects deleted at once), the tool versions, the hash
policy and the strategy ``magw apply`` would use; then its verdicts. Without ``--netns``, when the current
namespace is, or may be, the host's initial one, it creates no probe objects at all and learns support from
dumps only, as ``apply --dry-run`` does. Nothing else is ever written; the only packets sent are single
ICMP echoes (firewall, mtu).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from magw.cli import UsageError
from magw.cli.nodeargs import add_netns_argument, require_netns
from magw.drivers.netlink.capabilities import HASH_POLICY_L4, Capabilities, detect
from magw.drivers.netns import current_netns_refusal
from magw.ops.diagnose.clock import KubeconfigError, kubeconfig_server
from magw.ops.diagnose.node import TOPICS as CHECK_TOPICS
from magw.ops.diagnose.node import NodeContext, diagnose_node
from magw.ops.diagnose.verdict import NodeReport, counts, exit_status, text_lines, worst

TOPICS = ("all", *CHECK_TOPICS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", nargs="?", default="all", choices=TOPICS,
                        help="what to check (default all): " + ", ".join(CHECK_TOPICS))
    add_netns_argument(parser, guard=False)  # it only reads: no guard of the current namespace
    parser.add_argument("--lab", metavar="NAME", help="check every node of this lab (magw lab up --name NAME)")
    parser.add_argument("--node", metavar="N", action="append", default=[],
                        help="with --lab: only this node (e.g. east-gw1); repeat for more")
    parser.add_argument("--clock-url", metavar="URL", action="append", default=[],
                        help="clock: compare with the Date header of this HTTP(S) server (the API server, e.g. "
                        "https://API:6443/version); repeat for more")
    parser.add_argument("--kubeconfig", metavar="PATH",
                        help="clock: compare with the Date header of this kubeconfig's API server (current context; "
                        "no credential is used)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def text_lines_caps(caps: Capabilities) -> list[str]:
    doc = caps.to_json()
    policy = caps.multipath_hash_policy
    advice = "" if policy == HASH_POLICY_L4 else f" (magw apply sets {HASH_POLICY_L4}: per-flow spreading)"
    lines = [
        f"kernel: {caps.kernel}",
        f"nexthop objects: {_yes(caps.nexthops)}",
        f"resilient groups: {_yes(caps.resilient)}",
        f"strategy for 'resilient': {doc['strategy']}",
        f"fib_multipath_hash_policy: {'unknown' if policy is None else policy}{advice}",
        f"iproute2: {caps.iproute2 or 'not found'}",
        f"nft: {caps.nft or 'not found'}",
    ]
    return lines + [f"note: {note}" for note in caps.notes]


def report_json(reports: list[NodeReport]) -> dict[str, Any]:
    return {"verdict": worst(r.verdict for r in reports).value, "counts": counts(reports),
            "nodes": [r.to_json() for r in reports]}


def _kube_clock(path: str | None) -> tuple[str, ...]:
    if path is None:
        return ()
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"--kubeconfig {path}: {exc.strerror or exc}") from None
    try:
        return (kubeconfig_server(text, path),)
    except KubeconfigError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    topic = getattr(args, "topic", "kernel")
    lab = getattr(args, "lab", None)
    nodes = list(getattr(args, "node", None) or [])
    clock_urls = tuple(getattr(args, "clock_url", None) or []) + _kube_clock(getattr(args, "kubeconfig", None))
    topics = list(CHECK_TOPICS) if topic == "all" else [topic]
    if nodes and not lab:
        raise UsageError("--node: only with --lab NAME")
    if lab:
        if args.netns is not None:
            raise UsageError("--lab and --netns: give one (the lab names its nodes' namespaces)")
        from magw.ops.diagnose.lab import LabNotFound, diagnose_lab

        try:
            reports = diagnose_lab(lab, nodes, topics, clock_urls)
        except LabNotFound as exc:
            raise UsageError(str(exc)) from None
        return _print(args, reports, None)
    netns = require_netns(args.netns, guard=False)
    # The host's namespace (or one we cannot tell apart from it) gets no probe objects: dumps only.
    read_only = netns is None and current_netns_refusal("probe", allow=False) is not None
    caps = detect(netns, read_only=read_only) if "kernel" in topics else None
    ctx = NodeContext(name=netns or "current namespace", netns=netns, clock_urls=clock_urls, read_only=read_only,
                      capabilities=caps)
    return _print(args, [diagnose_node(ctx, topics)], caps if topic == "kernel" else None, netns)


def _print(args: argparse.Namespace, reports: list[NodeReport], caps: Capabilities | None,
           netns: str | None = None) -> int:
    if args.json:
        doc = report_json(reports)
        if caps is not None:  # diagnose kernel: its capability keys as before, the verdicts besides
            doc = {"netns": netns, **caps.to_json(), **doc}
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        head = [*text_lines_caps(caps), ""] if caps is not None else []
        print("\n".join(head + text_lines(reports)))
    return exit_status(reports)
