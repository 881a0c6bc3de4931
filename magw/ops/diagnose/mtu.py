"""MTU and path MTU across each cable (verdicts only).

Static: a tunnel device's MTU must fit in its underlay's MTU minus the encapsulation overhead (VXLAN 50 bytes;
through WireGuard another 60 for the wg device itself). Path: an echo with DF set, the size of a full tunnel
packet (tunnel MTU + overhead), sent to each remote VTEP's underlay address; answered means the underlay path
carries a full-size tunnel packet without fragmenting it.
"""

from __future__ import annotations

import attrs

from magw.model.cable import WG_OVERHEAD
from magw.model.vtep import VXLAN_OVERHEAD
from magw.ops.diagnose.verdict import Check, failed, passed, warned

TOPIC = "mtu"


@attrs.frozen(kw_only=True)
class TunnelMtu:
    """A tunnel device, its MTU, the device its packets leave through (the underlay) and that one's MTU."""

    device: str
    mtu: int
    underlay: str | None
    underlay_mtu: int | None
    overhead: int = VXLAN_OVERHEAD


@attrs.frozen(kw_only=True)
class PathProbe:
    """A DF echo of ``size`` bytes (IP total length) to ``target`` for ``device``: answered, or why not."""

    device: str
    target: str
    size: int
    answered: bool
    error: str = ""


def overhead_of(device_kind: str) -> int:
    return WG_OVERHEAD if device_kind == "wireguard" else VXLAN_OVERHEAD


def mtu_checks(tunnels: list[TunnelMtu], prefix: str) -> list[Check]:
    out: list[Check] = []
    if not tunnels:
        out.append(warned(TOPIC, "tunnels", "no magw tunnel device in this namespace (vxlan-tunnel, vx-submariner)",
                          "start the route agent (magw-route-agent) or check --netns names the node"))
    for t in tunnels:
        name = f"{t.device} mtu"
        if t.underlay is None or t.underlay_mtu is None:
            out.append(warned(TOPIC, name, f"{t.mtu}, underlay device not found (no route to a remote VTEP)",
                              f"{prefix}ip route get <remote VTEP underlay IP>"))
            continue
        room = t.underlay_mtu - t.overhead
        seen = f"{t.mtu}, underlay {t.underlay} {t.underlay_mtu} - overhead {t.overhead} = {room}"
        if t.mtu > room:
            out.append(failed(TOPIC, name, seen + ": full-size packets are fragmented or dropped",
                              f"{prefix}ip link set {t.device} mtu {room} (or raise {t.underlay}'s MTU; "
                              "config.underlay_mtu in the snapshot)"))
        else:
            out.append(passed(TOPIC, name, seen))
    return out


def path_checks(probes: list[PathProbe], prefix: str) -> list[Check]:
    out: list[Check] = []
    for p in probes:
        name = f"path mtu {p.device} -> {p.target}"
        if p.answered:
            out.append(passed(TOPIC, name, f"{p.size} bytes with DF answered"))
        else:
            why = f" ({p.error})" if p.error else ""
            out.append(failed(TOPIC, name, f"{p.size} bytes with DF not answered{why}: the path cannot carry a "
                              "full tunnel packet", f"lower {p.device}'s MTU below {p.size} - overhead, or raise "
                              f"the MTU on the path to {p.target} ({prefix}ip route get {p.target})"))
    return out
