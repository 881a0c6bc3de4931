"""``magw diagnose kernel``: what the kernel of a namespace supports, and its multipath hash policy.

    magw diagnose kernel [--netns NS] [--json]

Probes nexthop objects and resilient groups (throwaway objects, deleted at
once), reads the tool versions and ``net.ipv4.fib_multipath_hash_policy``, and
says which strategy ``magw apply`` would use for a snapshot asking for
``resilient``. Changes nothing else. Without ``--netns``, when the current
namespace is, or may be, the host's initial one, it creates no probe objects at
all and learns support from dumps only, as ``apply --dry-run`` does.
"""

from __future__ import annotations

import argparse
import json

from magw.cli.nodeargs import add_netns_argument, require_netns
from magw.drivers.netlink.capabilities import HASH_POLICY_L4, Capabilities, detect
from magw.drivers.netns import current_netns_refusal

TOPICS = ("kernel",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", choices=TOPICS, help="what to diagnose: kernel (capabilities of the namespace)")
    add_netns_argument(parser, guard=False)  # it only reads: no guard of the current namespace
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def text_lines(caps: Capabilities) -> list[str]:
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


def run(args: argparse.Namespace) -> int:
    netns = require_netns(args.netns, guard=False)
    # The host's namespace (or one we cannot tell apart from it) gets no probe objects: dumps only.
    read_only = netns is None and current_netns_refusal("probe", allow=False) is not None
    caps = detect(netns, read_only=read_only)
    if args.json:
        print(json.dumps({"netns": netns, **caps.to_json()}, indent=2, sort_keys=True))
    else:
        print("\n".join(text_lines(caps)))
    return 0
