"""Gateway health as each cluster of a lab sees it, from the route agents' status files (``magw lab status``).

Every route agent's status file has a ``health`` section (docs/health.md): the
peers it probes and their states. Per cluster, a gateway is ``down`` when any
node of that cluster says so (with the names of those nodes), ``up`` when some
node saw it answer, ``pending`` (published lately, not answered yet) or
``unknown`` otherwise; ``no_reach`` lists, per remote
cluster, the nodes whose probes say the gateway lost it.

Only current status files count: the file of a route agent that is dead, or that its process has not written
yet (``status.agent_sync``), holds the last words of a process that is gone, and is left out.

The broker's Health document (docs/health.md: an operator's override) counts as well, as every node plans with
it: a gateway it lists in ``down`` is ``down`` in every cluster's view, ``down_by`` naming ``HEALTH_DOCUMENT``,
and its ``reach`` gives ``no_reach`` entries likewise, so ``status`` says what ``verify`` and the kernels see.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from magw.lab.build.state import LabState
from magw.lab.planes.daemons import agent_status
from magw.lab.scenarios.failure import failed_ports
from magw.lab.spec.layout import LabLayout
from magw.model import Health
from magw.sources.file.broker import FileBroker

HEALTH_DOCUMENT = "Health document"
AgentStatuses = Mapping[str, Mapping[str, Any] | None]  # node -> its route agent's current status (None: none)


def _entry(view: dict[str, dict[str, Any]], gateway: str) -> dict[str, Any]:
    return view.setdefault(gateway, {"state": "unknown", "down_by": [], "no_reach": {}})


def _merge(view: dict[str, dict[str, Any]], observer: str, peer: Mapping[str, Any]) -> None:
    entry = _entry(view, peer["hostname"])
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


def cluster_view(
    observers: Iterable[tuple[str, Mapping[str, Any] | None]],
    broker: Health,
    *,
    cluster_of: Mapping[str, str],
    clusters: Iterable[str],
) -> dict[str, dict[str, Any]]:
    """One cluster's view: its nodes' current status documents (node, document or None: left out), then the
    broker's Health document. ``cluster_of``: gateway -> its cluster; ``clusters``: every cluster id."""
    view: dict[str, dict[str, Any]] = {}
    for observer, status in observers:
        for peer in ((status or {}).get("health") or {}).get("peers", []):
            _merge(view, observer, peer)
    for gateway in sorted(broker.down):
        entry = _entry(view, gateway)
        entry["state"] = "down"
        entry["down_by"].append(HEALTH_DOCUMENT)
    for gateway, reached in broker.reach:
        own = cluster_of.get(gateway)
        for lost in sorted(c for c in clusters if c != own and c not in reached):
            _entry(view, gateway)["no_reach"].setdefault(lost, []).append(HEALTH_DOCUMENT)
    return dict(sorted(view.items()))


def broker_health(lab: LabLayout, st: LabState) -> Health:
    """The broker's Health document as the route agents read it (empty without one, or on a kube lab)."""
    if st.kube or not st.broker_dir.is_dir():
        return Health()
    broker = FileBroker(st.broker_dir, local_cluster=lab.clusters[0].id)
    broker.scan()
    return broker.snapshot.health if broker.snapshot is not None else Health()


def health_doc(lab: LabLayout, st: LabState, statuses: AgentStatuses | None = None) -> dict[str, Any]:
    """``{"clusters": {cluster: {gateway: {state, down_by, no_reach}}}, "failed": {node: [links down]}}``.

    ``statuses``: every node's current route agent status (default: every status file, as it is)."""
    if statuses is None:
        statuses = {n.name: agent_status(st, n) for n in lab.nodes}
    broker = broker_health(lab, st)
    cluster_of = {g.name: g.cluster for g in lab.gateways}
    ids = [c.id for c in lab.clusters]
    clusters = {
        c.id: cluster_view(
            ((n.name, statuses.get(n.name)) for n in c.nodes), broker, cluster_of=cluster_of, clusters=ids
        )
        for c in lab.clusters
    }
    return {"clusters": clusters, "failed": failed_ports(lab, ovn=st.ovn)}


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
