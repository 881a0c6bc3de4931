"""Gateway health as each cluster of a lab sees it, from the route agents' status files (``magw lab status``).

Every route agent's status file has a ``health`` section (docs/health.md): the
peers it probes and their states. Per cluster, a gateway is ``down`` when any
node of that cluster says so (with the names of those nodes), ``up`` when some
node saw it answer, ``pending`` (published lately, not answered yet) or
``unknown`` otherwise; ``no_reach`` lists, per remote
cluster, the nodes whose probes say the gateway lost it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from magw.lab.build.state import LabState
from magw.lab.planes.daemons import agent_status
from magw.lab.scenarios.failure import failed_ports
from magw.lab.spec.layout import LabLayout


def _merge(view: dict[str, dict[str, Any]], observer: str, peer: Mapping[str, Any]) -> None:
    entry = view.setdefault(peer["hostname"], {"state": "unknown", "down_by": [], "no_reach": {}})
    if peer["state"] == "down":
        entry["down_by"].append(observer)
        entry["state"] = "down"
    elif peer["state"] == "up" and entry["state"] in ("unknown", "pending"):
        entry["state"] = "up"
    elif peer["state"] == "pending" and entry["state"] == "unknown":
        entry["state"] = "pending"
    for cluster, reach in (peer.get("reach") or {}).items():
        if reach == "down":
            entry["no_reach"].setdefault(cluster, []).append(observer)


def health_doc(lab: LabLayout, st: LabState) -> dict[str, Any]:
    """``{"clusters": {cluster: {gateway: {state, down_by, no_reach}}}, "failed": {node: [links down]}}``."""
    clusters: dict[str, dict[str, dict[str, Any]]] = {}
    for c in lab.clusters:
        view: dict[str, dict[str, Any]] = {}
        for node in c.nodes:
            health = (agent_status(st, node) or {}).get("health") or {}
            for peer in health.get("peers", []):
                _merge(view, node.name, peer)
        clusters[c.id] = dict(sorted(view.items()))
    return {"clusters": clusters, "failed": failed_ports(lab)}


def health_text(doc: Mapping[str, Any]) -> list[str]:
    """Lines for ``status_text``: one per cluster, then one per gateway with a lost cluster; failed nodes."""
    lines = ["gateway health, as each cluster sees it:"]
    for cluster, view in doc["clusters"].items():
        parts = []
        for gw, entry in view.items():
            by = f" (by {', '.join(entry['down_by'])})" if entry["down_by"] else ""
            parts.append(f"{gw} {entry['state'].upper() if entry['state'] == 'down' else entry['state']}{by}")
        lines.append(f"  {cluster}: {' | '.join(parts) or 'no probes reported yet'}")
        for gw, entry in view.items():
            for lost, observers in entry["no_reach"].items():
                lines.append(f"    {gw} does not reach {lost} (by {', '.join(observers)})")
    for node, links in doc["failed"].items():
        lines.append(f"  failed: {node} ({', '.join(links)} link down)")
    return lines
