"""Checks across the items of a snapshot: references, duplicates, overlaps, VTEP collisions.

The items arrive in document order, so an error names the offending item by its
index (``endpoints[2].cluster``) and, where two items clash, the first one too.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Hashable, Sequence
from ipaddress import IPv4Address, IPv4Network
from itertools import repeat
from typing import NamedTuple

import attrs

from magw.model import Cluster, Endpoint, Node, net_key
from magw.model.vtep import vtep_ip
from magw.snapshot.fields import FieldError, item_path, key_path

_NETMASKS = tuple((0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF for length in range(33))


class Located(NamedTuple):
    """A network with the path it had in the document (the model sorts and merges lists).

    A cluster's ranges carry their place inside the cluster item (``pod_cidrs``, 3), the item's own path is
    ``ParsedCluster.path``: a parsed cluster reused at another position (``magw.snapshot.cache``) then
    names the right place without rebuilding its thousands of ranges. A NamedTuple, not an attrs class:
    one per CIDR of the snapshot, and it builds in under half the time (docs/performance.md: 100k of them at a load).
    """

    net: IPv4Network
    field: str  # the list's key inside the item: ``pod_cidrs``
    position: int  # in that list

    @property
    def path(self) -> str:
        """``pod_cidrs[3]``, written when a message needs it (not 100k strings at every load, docs/performance.md)."""
        return item_path(self.field, self.position)


def located(nets: Sequence[IPv4Network], path: str) -> tuple[Located, ...]:
    """Pair each network of the list at ``path`` with its position, in document order."""
    return tuple(map(Located, nets, repeat(path), range(len(nets))))


@attrs.frozen(kw_only=True)
class ParsedCluster:
    cluster: Cluster
    ranges: tuple[Located, ...]  # paths relative to ``path``
    path: str = ""  # of the item: ``clusters[1]``

    def where(self, r: Located) -> str:
        """The full path of one of its ranges."""
        return key_path(self.path, r.path)

    def at(self, path: str) -> ParsedCluster:
        return self if path == self.path else attrs.evolve(self, path=path)


@attrs.frozen(kw_only=True)
class ParsedEndpoint:
    endpoint: Endpoint
    subnets: tuple[Located, ...]  # paths relative to ``path``, as ParsedCluster's ranges
    path: str = ""

    def where(self, r: Located) -> str:
        return key_path(self.path, r.path)

    def at(self, path: str) -> ParsedEndpoint:
        return self if path == self.path else attrs.evolve(self, path=path)


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
    overlaps: OverlapCheck | None = None,
    subnets: SubnetCheck | None = None,
) -> None:
    """Raise FieldError for the first relation between items that does not hold.

    ``overlaps`` replaces ``check_overlaps`` and ``subnets`` a fresh ``SubnetChecker`` (same verdicts, same
    errors), e.g. by ones that remember what passed (``magw.snapshot.cache``).
    """
    _check_clusters(local_cluster, clusters, overlaps or check_overlaps)
    _check_nodes(nodes)
    _check_endpoints(local_cluster, [c.cluster for c in clusters], nodes, endpoints, subnets or SubnetChecker())
    _check_health(local_cluster, [e.endpoint for e in endpoints], {c.cluster.id for c in clusters}, health)


def _no_duplicates(values: Sequence[Hashable], paths: Sequence[str], what: str) -> None:
    """Raise on the second occurrence of a value: ``path: duplicate WHAT 'x' (first at path)``."""
    seen: dict[Hashable, str] = {}
    for value, path in zip(values, paths, strict=True):
        if value in seen:
            raise FieldError(path, f"duplicate {what} {str(value)!r} (first at {seen[value]})")
        seen[value] = path


def _check_clusters(local_cluster: str, clusters: Sequence[ParsedCluster], overlaps: OverlapCheck) -> None:
    ids = [c.cluster.id for c in clusters]
    _no_duplicates(ids, [f"clusters[{i}].id" for i in range(len(clusters))], "cluster id")
    if local_cluster not in ids:
        known = ", ".join(sorted(ids)) or "none"
        raise FieldError("local_cluster", f"missing local cluster {local_cluster!r} in clusters (known: {known})")
    overlaps(clusters)


OverlapCheck = Callable[[Sequence[ParsedCluster]], None]


def check_overlaps(clusters: Sequence[ParsedCluster]) -> None:
    """Raise FieldError when a range of one cluster overlaps a range of another (or a global CIDR).

    Whether a list passes is a property of its pairs of clusters (a cluster with itself included, for
    the global CIDRs), so every sub-list of a list that passed passes too: ``magw.snapshot.cache``
    relies on that.
    """
    if not any(c.cluster.global_cidrs for c in clusters):
        _check_overlaps(clusters)
        return
    # Globalnet (docs/globalnet.md): a cluster with global CIDRs may overlap other clusters' pod and service CIDRs;
    # a global CIDR overlaps nothing. Check 1: the ranges that must be unique across clusters (every range
    # of a cluster without global CIDRs, only the global CIDRs of one with them). Check 2: the pod and
    # service CIDRs of Globalnet clusters against every global CIDR, their own cluster's included.
    _check_overlaps([_unique_ranges(c) for c in clusters])
    _check_against_globals(clusters)


def _is_global(r: Located) -> bool:
    return r.field == "global_cidrs"


def _unique_ranges(parsed: ParsedCluster) -> ParsedCluster:
    if not parsed.cluster.global_cidrs:
        return parsed
    return attrs.evolve(parsed, ranges=tuple(r for r in parsed.ranges if _is_global(r)))


def _check_against_globals(clusters: Sequence[ParsedCluster]) -> None:
    """Each pod/service range of a Globalnet cluster against the sorted, disjoint global CIDRs: O(n log n)."""
    globals_ = sorted(
        (
            (int(r.net.network_address), int(r.net.broadcast_address), c.where(r), r.net, c.cluster.id)
            for c in clusters
            for r in c.ranges
            if _is_global(r)
        ),
        key=lambda g: (g[0], -g[1]),
    )
    merged: list[tuple[int, int, str, IPv4Network, str]] = []  # disjoint: nested global CIDRs of one cluster merge
    for g in globals_:
        if merged and g[0] <= merged[-1][1]:
            if g[1] > merged[-1][1]:
                merged[-1] = (merged[-1][0], g[1], *merged[-1][2:])
            continue
        merged.append(g)
    globals_ = merged
    starts = [g[0] for g in globals_]
    for parsed in clusters:
        if not parsed.cluster.global_cidrs:
            continue
        for r in parsed.ranges:
            if _is_global(r):
                continue
            lo, hi = int(r.net.network_address), int(r.net.broadcast_address)
            i = bisect.bisect_right(starts, hi) - 1  # the last global range starting at or below hi
            if i >= 0 and globals_[i][1] >= lo:
                _, _, other_path, other, owner = globals_[i]
                raise FieldError(
                    parsed.where(r), f"{r.net} overlaps global CIDR {other} of cluster {owner!r} ({other_path})"
                )


def _check_overlaps(clusters: Sequence[ParsedCluster]) -> None:
    """No range of one cluster may overlap a range of another: routing toward them would be ambiguous.

    The error names the first range in document order that overlaps a range of an earlier cluster,
    and the first such earlier range: what comparing every pair in document order would report.

    Shaped for speed (docs/performance.md): comparing every pair was quadratic (94 s at 10k CIDRs, the bulk of
    ``magw plan``). Two IPv4 prefixes overlap only when one holds the other, and the prefixes that can
    hold a range are its own network masked to each prefix length present in the input (usually two
    or three lengths), so each range looks up those exact ``(network, prefixlen)`` keys in one dict
    built up front, on integers: O(n log n) in all, no ``ipaddress`` object in the loop.
    """
    flat: list[tuple[Located, ParsedCluster, int]] = []  # (range, its cluster, cluster index), document order
    ends: list[int] = []  # for each cluster, the index in ``flat`` past its last range
    for ci, parsed in enumerate(clusters):
        flat.extend((r, parsed, ci) for r in parsed.ranges)
        ends.append(len(flat))
    keys = [net_key(r.net) for r, _, _ in flat]
    holders: dict[tuple[int, int], list[int]] = {}  # exact prefix -> its indices in ``flat``, ascending
    for i, key in enumerate(keys):
        holders.setdefault(key, []).append(i)
    lengths = sorted({plen for _, plen in keys})
    first = len(flat)  # the first range in document order that overlaps an earlier cluster's range
    for i, (net, plen) in enumerate(keys):
        ci = flat[i][2]
        begin, end = (ends[ci - 1] if ci else 0), ends[ci]
        for length in lengths:
            if length > plen:
                break
            found = holders.get((net & _NETMASKS[length], length))
            if found is None:
                continue
            if found[0] < begin:  # a range of an earlier cluster holds (or equals) range i
                first = min(first, i)
            if length < plen:  # ranges of later clusters strictly holding range i: the first of them
                later = bisect.bisect_left(found, end)
                if later < len(found):
                    first = min(first, found[later])
    if first == len(flat):
        return
    mine, mine_c, mine_ci = flat[first]
    for other, other_c, _ in flat[: ends[mine_ci - 1]]:  # first > 0: cluster 0 has no earlier cluster
        if mine.net.overlaps(other.net):
            raise FieldError(
                mine_c.where(mine),
                f"{mine.net} overlaps {other.net} of cluster {other_c.cluster.id!r} ({other_c.where(other)})",
            )


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
    local_cluster: str,
    clusters: Sequence[Cluster],
    nodes: Sequence[Node],
    parsed: Sequence[ParsedEndpoint],
    check_subnets: SubnetCheck,
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
        check_subnets(item, by_id[item.endpoint.cluster])
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


class _Holders:
    """The CIDRs of one cluster as exact ``(network, prefixlen)`` keys, to ask "does one hold this subnet?".

    Shaped for speed (docs/performance.md): testing each subnet against every CIDR of its cluster is quadratic
    when both are many; a prefix can only be held by its own network masked to one of the prefix
    lengths present, so a subnet costs one dict lookup per distinct length.
    """

    def __init__(self, cidrs: Sequence[IPv4Network]) -> None:
        self.keys = {net_key(n) for n in cidrs}
        self.lengths = sorted({plen for _, plen in self.keys})

    def hold(self, net: IPv4Network) -> bool:
        start, plen = net_key(net)
        return any((start & _NETMASKS[length], length) in self.keys for length in self.lengths if length <= plen)


SubnetCheck = Callable[[ParsedEndpoint, Cluster], None]


class SubnetChecker:
    """Raise FieldError for the first subnet of an endpoint that no CIDR of its cluster holds.

    Builds the ``_Holders`` of each cluster once, for the clusters it is asked about; ``keep`` drops the
    others (the objects themselves are held, so an ``id`` is never another cluster's).
    """

    def __init__(self) -> None:
        self._holders: dict[int, tuple[Cluster, _Holders]] = {}

    def __call__(self, parsed: ParsedEndpoint, cluster: Cluster) -> None:
        if not parsed.subnets:
            return
        entry = self._holders.get(id(cluster))
        if entry is None or entry[0] is not cluster:
            entry = self._holders[id(cluster)] = (cluster, _Holders(cluster.cidrs))
        holders = entry[1]
        for subnet in parsed.subnets:
            if not holders.hold(subnet.net):
                raise FieldError(
                    parsed.where(subnet), f"{subnet.net} is not inside the CIDRs of cluster {cluster.id!r}"
                )

    def keep(self, clusters: Collection[int]) -> None:
        """Forget the holders of clusters whose id is not in ``clusters``."""
        self._holders = {key: entry for key, entry in self._holders.items() if key in clusters}


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
