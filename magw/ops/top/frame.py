"""One frame of ``magw top``: per node its traffic rates, tracked flows and last failover, then its paths. Pure.

Rates are the difference of the kernel's interface counters (``ip -s -j link``, ``stats64``) between two
readings, over the time between them: ``vxlan-tunnel`` (traffic to and from remote clusters, inner packets),
``vx-submariner`` (inside the cluster), ``magw-wg`` (with the WireGuard cable: encrypted) and ``wan0`` (the
lab gateway's WAN link: everything on the wire). A counter that went backwards (a device made again) gives no
rate. Flows: the node's tracked connections (``conntrack -C``). The last failover: the last path whose
``alive`` state went down in the route agent's ``health.transitions[]``, with what detecting it cost
(``detection_seconds``: from its last answered probe to the moment it was called down) and when it came back.
Paths: ``magw show connections``' rows of the node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from magw.ops.show import render
from magw.ops.show.connections import connection_rows, default_nodes, last_failover
from magw.ops.show.inputs import Inputs

DEVICES = ("vxlan-tunnel", "vx-submariner", "magw-wg", "wan0")


def link_rates(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]], seconds: float
) -> dict[str, dict[str, float]]:
    """Device -> {rx_bps, tx_bps, rx_pps, tx_pps} (bits and packets per second) of devices in both readings."""
    out: dict[str, dict[str, float]] = {}
    if seconds <= 0:
        return out
    for dev in DEVICES:
        a, b = before.get(dev), after.get(dev)
        if a is None or b is None:
            continue
        deltas = {k: b.get(k, 0) - a.get(k, 0) for k in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets")}
        if any(v < 0 for v in deltas.values()):
            continue
        out[dev] = {
            "rx_bps": deltas["rx_bytes"] * 8 / seconds,
            "tx_bps": deltas["tx_bytes"] * 8 / seconds,
            "rx_pps": deltas["rx_packets"] / seconds,
            "tx_pps": deltas["tx_packets"] / seconds,
        }
    return out


def frame_doc(before: Inputs | None, now: Inputs, nodes: Sequence[str] | None = None) -> dict[str, Any]:
    """``{"source", "nodes": [{node, cluster, rates, flows, last_failover, paths}]}``; rates empty without
    ``before`` (the first frame)."""
    seconds = 0.0 if before is None else now.at - before.at
    out = []
    for node in nodes or default_nodes(now):
        kernel = now.kernels.get(node)
        old = None if before is None else before.kernels.get(node)
        rates = link_rates(old.links, kernel.links, seconds) if kernel is not None and old is not None else {}
        health = (now.statuses.get(node) or {}).get("health") or {}
        out.append(
            {
                "node": node,
                "cluster": now.cluster_of(node),
                "rates": rates,
                "flows": None if kernel is None else kernel.flows,
                "last_failover": last_failover(health.get("transitions") or ()),
                "paths": connection_rows(now, [node]),
            }
        )
    return {"source": now.source, "interval": seconds, "nodes": out}


def rate_text(bps: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.1f} {unit}"
    return f"{bps:.0f} bit/s"


def _failover_text(event: Mapping[str, Any] | None, now: datetime) -> str:
    if event is None:
        return "last failover: none seen"
    detect = event.get("detection_seconds")
    cost = f", detected in {detect * 1000:.0f} ms" if isinstance(detect, int | float) else ""
    back = f", back {render.since_text(event['recovered_at'], now)}" if event.get("recovered_at") else ", still down"
    return f"last failover: {event.get('peer')} down {render.since_text(event.get('at'), now)}{cost}{back}"


def frame_lines(doc: Mapping[str, Any], now: datetime) -> list[str]:
    """The frame as text lines (the screen clips them to its width)."""
    lines = [f"magw top - {doc['source']} - {now.strftime('%H:%M:%S')} UTC - q quits", ""]
    for n in doc["nodes"]:
        flows = "-" if n["flows"] is None else str(n["flows"])
        lines.append(f"{n['node']} ({n['cluster']})  flows {flows}  {_failover_text(n['last_failover'], now)}")
        for dev, r in n["rates"].items():
            lines.append(
                f"    {dev:<13} tx {rate_text(r['tx_bps']):>12} {r['tx_pps']:>8.0f} pkt/s"
                f"   rx {rate_text(r['rx_bps']):>12} {r['rx_pps']:>8.0f} pkt/s"
            )
        if not n["rates"]:
            lines.append("    (rates from the next frame on)")
        for p in n["paths"]:
            lines.append(
                f"  -> {p['remote']:<16} {p['cable']:<9} {p['state']:<8} rtt {render.rtt_text(p['rtt']):<17} ms"
                f"  share {render.share_text(p['share']):>4}  flows {render.dash(p.get('flows')):>4}"
                f"  since {render.since_text(p['since'], now)}"
            )
        if not n["paths"]:
            lines.append("  (no paths reported: no current status of this node's route agent)")
        lines.append("")
    return lines
