"""What ``magw show`` and ``magw top`` read, as one value: every source fills what it can and leaves the rest empty.

- ``snapshots``: cluster id -> that cluster's snapshot as its daemons see it (the file broker's, or the one the
  Kubernetes source assembles); nodes, endpoints, config, Globalnet and egress gateway objects come from there.
- ``statuses``: node -> its route agent's current status document (``health.peers[]`` with ``state``, ``rtt``,
  ``since``; ``health.transitions[]``); only the lab (or ``--status-file``) has them.
- ``kernels``: node -> what its kernel holds that the shares and rates need (lab only).
- ``gateway_statuses``: gateway node -> the status its gateway daemon wrote to its ``Gateway`` object (kube).
- ``versions``: one row per component found.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from magw.model import Node, Snapshot

Doc = Mapping[str, Any]


@attrs.frozen(kw_only=True)
class NodeKernel:
    """One node's kernel, read with ``ip -j``: its nexthops (``ip -j nexthop show``), the buckets of its resilient
    groups (``ip -j nexthop bucket show``), the counters of magw's devices and the WAN link (dev -> ``stats64``
    fields rx_bytes, tx_bytes, rx_packets, tx_packets), the number of tracked connections (None: unknown), and
    of those toward remote clusters (``tracked``, None: not read) how many went to each path's gateway address,
    as the node at that address tracks them (``path_flows``, ``magw.ops.show.flows``)."""

    nexthops: tuple[Doc, ...] = ()
    buckets: tuple[Doc, ...] = ()
    links: Mapping[str, Mapping[str, int]] = attrs.field(factory=dict)
    flows: int | None = None
    tracked: int | None = None
    path_flows: Mapping[str, int] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Inputs:
    source: str
    snapshots: Mapping[str, Snapshot] = attrs.field(factory=dict)
    statuses: Mapping[str, Doc] = attrs.field(factory=dict)
    kernels: Mapping[str, NodeKernel] = attrs.field(factory=dict)
    gateway_statuses: Mapping[str, Doc] = attrs.field(factory=dict)
    versions: tuple[Mapping[str, str], ...] = ()
    at: float = 0.0  # when it was read (time.monotonic()): rates divide counter differences by it

    def nodes(self) -> list[tuple[str, Node]]:
        """(cluster, node) of every node of every cluster, in cluster order then node order."""
        return [(cid, n) for cid, snap in sorted(self.snapshots.items()) for n in snap.nodes]

    def gateway_nodes(self) -> list[tuple[str, Node]]:
        return [(cid, n) for cid, n in self.nodes() if n.gateway]

    def cluster_of(self, node: str) -> str | None:
        for cid, n in self.nodes():
            if n.name == node:
                return cid
        status = self.statuses.get(node)
        return None if status is None else str(status.get("cluster"))
