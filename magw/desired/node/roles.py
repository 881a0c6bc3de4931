"""Who is an active gateway, and whether the planning node plans as a gateway or a worker.

Multi-active mode: every published endpoint of a cluster is active.
Single-gateway mode: one endpoint per cluster, the first by hostname that is
not down and, with ``cable: wireguard``, publishes its key (the first one if none
is: it is unusable then anyway). With one
endpoint per cluster both modes elect the same gateway, so "single-gateway mode
equals multi-active mode with one gateway" holds exactly.
"""

from __future__ import annotations

import attrs

from magw.model import Endpoint, Node, Snapshot


def active_endpoints(snapshot: Snapshot, cluster_id: str) -> tuple[Endpoint, ...]:
    """The active gateways of ``cluster_id``, sorted by hostname."""
    endpoints = tuple(sorted(snapshot.endpoints_of(cluster_id), key=lambda e: e.hostname))
    if snapshot.config.multi_active or not endpoints:
        return endpoints
    for endpoint in endpoints:  # with cable wireguard, a gateway without its key cannot carry traffic yet
        if endpoint.hostname not in snapshot.health.down and endpoint.cable_ready(snapshot.config.cable):
            return (endpoint,)
    return endpoints[:1]


@attrs.frozen(kw_only=True)
class NodeRole:
    """The planning node and what it is.

    ``endpoint``: the node's own active local endpoint (gateways only).
    ``local_gateways``: the active local gateways other than the node itself.
    """

    node: Node
    endpoint: Endpoint | None
    local_gateways: tuple[Endpoint, ...]

    @property
    def gateway(self) -> bool:
        return self.endpoint is not None


def node_role(snapshot: Snapshot, name: str) -> NodeRole:
    """The role of node ``name``; KeyError/ValueError with a clear message for bad input."""
    if snapshot.local_cluster not in {c.id for c in snapshot.clusters}:
        raise ValueError(f"local_cluster: {snapshot.local_cluster!r} is not one of the snapshot's clusters")
    try:
        node = snapshot.node(name)
    except KeyError:
        known = ", ".join(n.name for n in snapshot.nodes) or "none"
        raise KeyError(f"node: {name!r} is not a node of cluster {snapshot.local_cluster!r} (known: {known})") from None
    active = active_endpoints(snapshot, snapshot.local_cluster)
    own = next((e for e in active if e.hostname == node.name), None) if node.gateway else None
    others = tuple(e for e in active if e.hostname != node.name)
    return NodeRole(node=node, endpoint=own, local_gateways=others)
