"""``conntrack -L`` text read into tuples. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from ipaddress import IPv4Address

import attrs

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
