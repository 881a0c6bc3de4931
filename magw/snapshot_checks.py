"""Checks across the items of a snapshot: references, duplicates, overlaps, VTEP collisions.

The items arrive in document order, so an error names the offending item by its
index (``endpoints[2].cluster``) and, where two items clash, the first one too.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.desired.vtep import vtep_ip
from magw.model import Cluster, Endpoint, Node
from magw.snapshot_fields import FieldError, item_path, key_path


@attrs.frozen(kw_only=True)
class Located:
    """A network with the path it had in the document (the model sorts and merges lists)."""

    net: IPv4Network
    path: str


def located(nets: Sequence[IPv4Network], path: str) -> tuple[Located, ...]:
    """Pair each network of the list at ``path`` with its item path, in document order."""
    return tuple(Located(net=net, path=item_path(path, i)) for i, net in enumerate(nets))


@attrs.frozen(kw_only=True)
class ParsedCluster:
    cluster: Cluster
    ranges: tuple[Located, ...]


@attrs.frozen(kw_only=True)
class ParsedEndpoint:
    endpoint: Endpoint
    subnets: tuple[Located, ...]


@attrs.frozen(kw_only=True)
class HealthRefs:
    """The names ``health`` refers to, in document order (the model's Health keeps sets only)."""

    down: tuple[str, ...] = ()
    reach: tuple[tuple[str, tuple[str, ...]], ...] = ()


def check_relations(
    *,
    local_cluster: str,
    clusters: Sequence[ParsedCluster],
    nodes: Sequence[Node],
    endpoints: Sequence[ParsedEndpoint],
    health: HealthRefs,
) -> None:
    """Raise FieldError for the first relation between items that does not hold."""
    _check_clusters(local_cluster, clusters)
    _check_nodes(nodes)
    _check_endpoints(local_cluster, [c.cluster for c in clusters], nodes, endpoints)
    _check_health(local_cluster, [e.endpoint for e in endpoints], {c.cluster.id for c in clusters}, health)


def _no_duplicates(values: Sequence[Hashable], paths: Sequence[str], what: str) -> None:
    """Raise on the second occurrence of a value: ``path: duplicate WHAT 'x' (first at path)``."""
    seen: dict[Hashable, str] = {}
    for value, path in zip(values, paths, strict=True):
        if value in seen:
            raise FieldError(path, f"duplicate {what} {str(value)!r} (first at {seen[value]})")
        seen[value] = path


def _check_clusters(local_cluster: str, clusters: Sequence[ParsedCluster]) -> None:
    ids = [c.cluster.id for c in clusters]
    _no_duplicates(ids, [f"clusters[{i}].id" for i in range(len(clusters))], "cluster id")
    if local_cluster not in ids:
        known = ", ".join(sorted(ids)) or "none"
        raise FieldError("local_cluster", f"missing local cluster {local_cluster!r} in clusters (known: {known})")
    _check_overlaps(clusters)


def _check_overlaps(clusters: Sequence[ParsedCluster]) -> None:
    """No range of one cluster may overlap a range of another: routing toward them would be ambiguous."""
    earlier: list[tuple[Located, str]] = []
    for parsed in clusters:
        for mine in parsed.ranges:
            for other, other_id in earlier:
                if mine.net.overlaps(other.net):
                    raise FieldError(
                        mine.path, f"{mine.net} overlaps {other.net} of cluster {other_id!r} ({other.path})"
                    )
        earlier.extend((r, parsed.cluster.id) for r in parsed.ranges)


def _check_nodes(nodes: Sequence[Node]) -> None:
    count = range(len(nodes))
    _no_duplicates([n.name for n in nodes], [f"nodes[{i}].name" for i in count], "node name")
    _no_duplicates([n.ip for n in nodes], [f"nodes[{i}].ip" for i in count], "node IP")
    _check_vteps([n.ip for n in nodes], [f"nodes[{i}].ip" for i in count], inter_cluster=False)


def _check_vteps(ips: Sequence[IPv4Address], paths: Sequence[str], *, inter_cluster: bool) -> None:
    """Two different IPs with the same low 24 bits get the same VTEP address: refuse them."""
    seen: dict[IPv4Address, tuple[IPv4Address, str]] = {}
    for ip, path in zip(ips, paths, strict=True):
        tep = vtep_ip(ip, inter_cluster=inter_cluster)
        if tep in seen:
            first_ip, first_path = seen[tep]
            raise FieldError(path, f"{ip} gives VTEP {tep}, the same as {first_ip} ({first_path})")
        seen[tep] = (ip, path)


def _check_endpoints(
    local_cluster: str, clusters: Sequence[Cluster], nodes: Sequence[Node], parsed: Sequence[ParsedEndpoint]
) -> None:
    by_id = {c.id: c for c in clusters}
    endpoints = [p.endpoint for p in parsed]
    count = range(len(endpoints))
    for i, ep in enumerate(endpoints):
        if ep.cluster not in by_id:
            raise FieldError(f"endpoints[{i}].cluster", f"unknown cluster {ep.cluster!r}")
    _no_duplicates([e.hostname for e in endpoints], [f"endpoints[{i}].hostname" for i in count], "endpoint hostname")
    nodes_by_name = {n.name: n for n in nodes}
    for i, item in enumerate(parsed):
        if item.endpoint.cluster == local_cluster:
            _check_local_endpoint(f"endpoints[{i}]", item.endpoint, nodes_by_name, local_cluster)
        _check_subnets(item, by_id[item.endpoint.cluster])
    _check_vteps([e.private_ip for e in endpoints], [f"endpoints[{i}].private_ip" for i in count], inter_cluster=True)


def _check_local_endpoint(path: str, ep: Endpoint, nodes: dict[str, Node], local_cluster: str) -> None:
    """A local endpoint is published by a gateway node and tunnels from that node's IP."""
    node = nodes.get(ep.hostname)
    if node is None:
        raise FieldError(
            key_path(path, "hostname"), f"{ep.hostname!r} is not a node of local cluster {local_cluster!r}"
        )
    if not node.gateway:
        raise FieldError(key_path(path, "hostname"), f"node {ep.hostname!r} is not a gateway (gateway: true)")
    if ep.private_ip != node.ip:
        raise FieldError(
            key_path(path, "private_ip"), f"{ep.private_ip} differs from node {node.name!r}'s ip {node.ip}"
        )


def _check_subnets(parsed: ParsedEndpoint, cluster: Cluster) -> None:
    for subnet in parsed.subnets:
        if not any(subnet.net.subnet_of(net) for net in cluster.cidrs):
            raise FieldError(subnet.path, f"{subnet.net} is not inside the CIDRs of cluster {cluster.id!r}")


def _check_health(local_cluster: str, endpoints: Sequence[Endpoint], cluster_ids: set[str], health: HealthRefs) -> None:
    gateways = {e.hostname: e for e in endpoints}
    for i, name in enumerate(health.down):
        if name not in gateways:
            raise FieldError(f"health.down[{i}]", f"unknown gateway {name!r}")
    for gw, reached in health.reach:
        path = f"health.reach.{gw}"
        if gw not in gateways:
            raise FieldError(path, f"unknown gateway {gw!r}")
        if gateways[gw].cluster != local_cluster:
            raise FieldError(path, f"{gw!r} is a gateway of cluster {gateways[gw].cluster!r}, not of the local cluster")
        for j, cid in enumerate(reached):
            if cid not in cluster_ids:
                raise FieldError(item_path(path, j), f"unknown cluster {cid!r}")
