"""Firewall paths: an echo through each cable to each peer VTEP (verdicts only).

A peer the route agent does not probe (health state ``unknown`` in its status file: a passive gateway of a
single-active cluster, which has no cable) is on no path: its silence passes, and says so.

The echo carries the health probes' ``ALIVE_ID`` (1), the id a gateway's liveness set lets through while its
route agent runs (``magw.health.liveness``); any other id is dropped there on purpose. An answer proves the
cable's UDP port and the VTEP both pass every firewall on the way, in both directions.
"""

from __future__ import annotations

import attrs

from magw.model.vtep import INTER_PORT, INTRA_PORT, VX_SUBMARINER, VXLAN_TUNNEL
from magw.ops.diagnose.verdict import Check, failed, passed

TOPIC = "firewall"
PORTS = {VXLAN_TUNNEL: INTER_PORT, VX_SUBMARINER: INTRA_PORT}


@attrs.frozen(kw_only=True)
class CableProbe:
    device: str
    vtep: str  # the peer's VTEP IP (the echo's destination)
    underlay: str | None  # the peer's underlay IP the VXLAN packet goes to (fdb dst)
    answered: bool
    error: str = ""
    agent_state: str | None = None  # the route agent's health state of this peer (its status file), None: unknown
    port: int | None = None  # the UDP port the cable's packets go to, when not the device's (WireGuard's)


UNPROBED = ("unknown",)  # the agent does not probe the peer (a passive gateway in single-active mode)


def path_checks(probes: list[CableProbe], prefix: str) -> list[Check]:
    out: list[Check] = []
    for p in probes:
        where = f" via {p.underlay}" if p.underlay else ""
        name = f"{p.device} -> {p.vtep}{where}"
        port = p.port or PORTS.get(p.device)
        if p.answered:
            out.append(passed(TOPIC, name, "echo answered through the cable"))
            continue
        if p.agent_state in UNPROBED:
            out.append(passed(TOPIC, name, f"not answered, and the route agent does not probe it either (health "
                              f"state {p.agent_state}): a passive gateway, on no path now"))
            continue
        why = f" ({p.error})" if p.error else ""
        udp = f"UDP {port}" if port else "the cable's UDP port"
        if p.port:  # VXLAN through WireGuard: the packets that cross firewalls are WireGuard's, between public IPs
            between = f"allow {udp} (WireGuard) both ways between this gateway's and the peer's public IPs"
        else:
            between = f"allow {udp} between this node and {p.underlay or 'the peer'} in both directions"
        out.append(failed(TOPIC, name, f"no answer through the cable{why}",
                          f"{between} (nft/iptables on both nodes, security groups); check the peer's route agent "
                          f"runs (its VTEP answers only then); {prefix}nft list ruleset"))
    return out
