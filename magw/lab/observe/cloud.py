"""What the lab's clouds did (topology ``load_balancer``, ``magw.lab.build.cloud``): their health check's events and
the translations their NAT made, read from the health check's log and the cloud namespace's conntrack table."""

from __future__ import annotations

import re
from ipaddress import IPv4Address

import attrs

from magw.lab.build import cloud as lab_cloud
from magw.lab.build import netns
from magw.lab.build.state import LabState
from magw.lab.observe.jsonlog import json_events

_PAIR = re.compile(r"\b(src|dst|sport|dport)=(\S+)")


@attrs.frozen(kw_only=True)
class HealthEvent:
    kind: str  # "down" or "up"
    port: int  # the listener
    backend: IPv4Address
    t: float  # wall-clock seconds


def health_events(st: LabState, cluster: str) -> list[HealthEvent]:
    """The backend changes the cluster's cloud made, oldest first ([] before its health check started)."""
    out = []
    for doc in json_events(lab_cloud.log_path(st, cluster)):
        event = doc.get("event")
        if event in ("cloudlb.backend_down", "cloudlb.backend_up"):
            kind = "down" if event.endswith("down") else "up"
            out.append(HealthEvent(kind=kind, port=int(doc["port"]), backend=IPv4Address(doc["backend"]), t=doc["t"]))
    return out


@attrs.frozen(kw_only=True)
class Translation:
    """One UDP conntrack entry of a cloud: the packet as it came (``orig_*``) and as it was sent on (``out_*``)."""

    orig_src: IPv4Address
    orig_sport: int
    orig_dst: IPv4Address
    orig_dport: int
    out_src: IPv4Address  # the source the far side sees
    out_sport: int
    out_dst: IPv4Address  # where it was delivered
    out_dport: int


def parse_conntrack(text: str) -> list[Translation]:
    """``conntrack -L -p udp`` lines: the first src/dst/sport/dport are the original direction, the second the
    reply's, whose destination is what the original's source was rewritten to and whose source is where the
    original went."""
    out = []
    for line in text.splitlines():
        pairs = _PAIR.findall(line)
        if len(pairs) < 8:
            continue
        o_src, o_dst, o_sport, o_dport, r_src, r_dst, r_sport, r_dport = (v for _k, v in pairs[:8])
        out.append(
            Translation(
                orig_src=IPv4Address(o_src),
                orig_sport=int(o_sport),
                orig_dst=IPv4Address(o_dst),
                orig_dport=int(o_dport),
                out_src=IPv4Address(r_dst),
                out_sport=int(r_dport),
                out_dst=IPv4Address(r_src),
                out_dport=int(r_sport),
            )
        )
    return out


def translations(namespace: str) -> list[Translation]:
    """The UDP translations a cloud namespace holds now."""
    return parse_conntrack(netns.ns_exec(namespace, "conntrack", "-L", "-p", "udp"))
