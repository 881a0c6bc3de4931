"""Which path each of a node's tracked flows takes, asked of the node's kernel itself. Pure but for the caller's
commands.

The node's tracked connections (``conntrack -L``) toward a remote cluster (original destination in a remote
cluster's pod or service CIDR) are each looked up with ``ip route get DST from SRC iif DEV ipproto P sport S
dport D``: the kernel's own route lookup with the flow's own hash inputs, so it names the nexthop the kernel
picks for that flow (``fib_multipath_hash_policy=1``: the ports count). ``DEV`` is the device the flow came in
on: the node's pod bridge for its own pods, ``vx-submariner`` for the rest (what a gateway forwards for its
workers). All lookups go in one ``ip -batch``; a lookup the kernel refuses is left uncounted (``-force``), so a
path's count is a lower bound and ``tracked`` says how many were asked. At most ``LIMIT`` flows per node.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network

import attrs

LIMIT = 2000
_FIELD = re.compile(r"(\w+)=(\S+)")


@attrs.frozen
class Flow:
    proto: str
    src: IPv4Address
    dst: IPv4Address
    sport: int | None = None
    dport: int | None = None


def parse_conntrack(text: str) -> list[Flow]:
    """The original-direction tuple of each TCP, UDP or ICMP entry of ``conntrack -L`` text."""
    flows = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] not in ("tcp", "udp", "icmp"):
            continue
        first: dict[str, str] = {}
        for key, value in _FIELD.findall(line):
            if key in first:  # the reply tuple starts: its src= repeats
                break
            first[key] = value
        try:
            flows.append(
                Flow(
                    proto=words[0],
                    src=IPv4Address(first["src"]),
                    dst=IPv4Address(first["dst"]),
                    sport=int(first["sport"]) if "sport" in first else None,
                    dport=int(first["dport"]) if "dport" in first else None,
                )
            )
        except (KeyError, ValueError):
            continue
    return flows


def route_get_lines(
    flows: Iterable[Flow],
    *,
    remote: Sequence[IPv4Network],
    own_pods: IPv4Network | None,
    pod_dev: str,
    limit: int = LIMIT,
) -> list[str]:
    """``ip -batch`` lines: one ``route get`` per flow toward ``remote``, at most ``limit``."""
    lines = []
    for f in flows:
        if not any(f.dst in net for net in remote):
            continue
        dev = pod_dev if own_pods is not None and f.src in own_pods else "vx-submariner"
        ports = f" sport {f.sport} dport {f.dport}" if f.sport is not None and f.dport is not None else ""
        lines.append(f"route get {f.dst} from {f.src} iif {dev} ipproto {f.proto}{ports}")
        if len(lines) >= limit:
            break
    return lines


def count_paths(batch_json: str) -> Counter[str]:
    """Gateway address -> flows routed to it, from ``ip -j -batch`` output (one JSON array per line)."""
    counted: Counter[str] = Counter()
    for line in batch_json.splitlines():
        line = line.strip()
        if not line.startswith("["):
            continue
        try:
            routes = json.loads(line)
        except ValueError:
            continue
        for route in routes if isinstance(routes, list) else ():
            if isinstance(route, dict) and route.get("gateway"):
                counted[str(route["gateway"])] += 1
    return counted
