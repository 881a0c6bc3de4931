"""Which path each of a node's tracked flows took, read from the next hop's own connection tracking. Pure but
for the caller's commands.

The path a flow takes cannot be asked of the node's kernel: ``ip route get`` with the flow's addresses and ports
hashes them, but a forwarded packet that already carries a layer-4 hash (the sending socket's ``sk_txhash``
for TCP and connected UDP in the same kernel, or a NIC's RSS hash) is routed by that hash instead
(``fib_multipath_hash``, policy 1), so the answer is right for about half of such flows on two paths.
What the kernel did is seen one hop on: the gateway a flow went to tracks it. So a node's tracked connections
(``conntrack -L``) toward a remote cluster (original destination in a remote cluster's pod or service CIDR) are
each looked for, as the packets leave the node (after its own NAT: the reply tuple, reversed), among the
tuples (original and reply) the next hop of each path tracks; a flow the next hop no longer tracks is not
counted, so a path's count is a lower bound and ``tracked`` says how many were looked for. At most ``LIMIT``
flows per node.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import IPv4Address, IPv4Network

import attrs

LIMIT = 2000
_FIELD = re.compile(r"(\w+)=(\S+)")
_PROTOS = ("tcp", "udp", "icmp")


@attrs.frozen
class Flow:
    """One direction of a connection: protocol, addresses and (TCP, UDP) ports."""

    proto: str
    src: IPv4Address
    dst: IPv4Address
    sport: int | None = None
    dport: int | None = None

    def reversed(self) -> Flow:
        return Flow(self.proto, self.dst, self.src, self.dport, self.sport)


@attrs.frozen
class Entry:
    """A tracked connection: its original and reply tuples."""

    original: Flow
    reply: Flow

    @property
    def leaving(self) -> Flow:
        """The tuple of the original direction's packets as they leave the node, after the node's own NAT."""
        return self.reply.reversed()


def _tuple(proto: str, fields: Mapping[str, str]) -> Flow:
    return Flow(
        proto=proto,
        src=IPv4Address(fields["src"]),
        dst=IPv4Address(fields["dst"]),
        sport=int(fields["sport"]) if "sport" in fields else None,
        dport=int(fields["dport"]) if "dport" in fields else None,
    )


def parse_conntrack(text: str) -> list[Entry]:
    """Each TCP, UDP or ICMP entry of ``conntrack -L`` text; a line that does not parse is skipped."""
    entries = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] not in _PROTOS:
            continue
        halves: list[dict[str, str]] = [{}]
        for key, value in _FIELD.findall(line):
            if key in halves[-1]:  # the reply tuple starts: its src= repeats
                if len(halves) == 2:
                    break
                halves.append({})
            halves[-1][key] = value
        if len(halves) < 2:
            continue
        try:
            entries.append(Entry(_tuple(words[0], halves[0]), _tuple(words[0], halves[1])))
        except (KeyError, ValueError):
            continue
    return entries


def toward(entries: Iterable[Entry], remote: Sequence[IPv4Network], limit: int = LIMIT) -> list[Entry]:
    """The entries whose original destination is in ``remote``, at most ``limit``."""
    out = []
    for e in entries:
        if any(e.original.dst in net for net in remote):
            out.append(e)
            if len(out) >= limit:
                break
    return out


def tracked_tuples(entries: Iterable[Entry]) -> frozenset[Flow]:
    """Both tuples of every entry: a packet in either direction of a connection the node tracks."""
    return frozenset(t for e in entries for t in (e.original, e.reply))


def count_paths(leaving: Iterable[Flow], next_hops: Mapping[str, frozenset[Flow]]) -> dict[str, int]:
    """Path (gateway address) -> how many of the ``leaving`` tuples its next hop tracks."""
    counted: Counter[str] = Counter()
    for flow in leaving:
        for address, seen in next_hops.items():
            if flow in seen:
                counted[address] += 1
    return dict(counted)
