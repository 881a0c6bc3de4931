"""Hypothesis strategies for valid Snapshots (reused by every engineer's property tests).

``snapshots()`` draws a clusterset of 1-4 clusters with non-overlapping CIDRs,
1-6 local nodes, 1-3 gateways per cluster, any strategy, multi-active on or
off, and random health (down gateways, reach maps). ``snapshot_and_node()``
also draws one local node to plan for.

Addresses are laid out so no two VTEPs collide (the planner rejects that):
cluster number ``i`` (1-4) owns 10.i/16-ish pods, 100.i/16-ish services and
optionally 242.254.i.0/24; local nodes are 172.18.0.k, remote gateways
172.(20+i).0.k.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from hypothesis import strategies as st

from magw.model import Cluster, Config, Endpoint, Health, Node, ResilientParams, Snapshot, Strategy

CLUSTER_NAMES = ("east", "west", "north", "south", "blue", "green")


@st.composite
def _cluster(draw: st.DrawFn, cid: str, number: int, globalnet: bool) -> Cluster:
    pod_len = draw(st.integers(16, 24))
    svc_len = draw(st.integers(16, 24))
    pods = [IPv4Network(f"10.{number}.0.0/{pod_len}")]
    if draw(st.booleans()):
        pods.append(IPv4Network(f"11.{number}.0.0/16"))
    globals_ = [IPv4Network(f"242.254.{number}.0/24")] if globalnet else []  # Globalnet is all or nothing
    return Cluster(
        id=cid,
        pod_cidrs=pods,
        service_cidrs=[IPv4Network(f"100.{number}.0.0/{svc_len}")],
        global_cidrs=globals_,
    )


@st.composite
def _local_nodes(
    draw: st.DrawFn, cid: str, number: int, max_nodes: int, max_gateways: int
) -> tuple[list[Node], list[Endpoint]]:
    count = draw(st.integers(1, max_nodes))
    names = [f"{cid}-n{k}" for k in range(count)]
    gateways = set(draw(st.permutations(names))[: draw(st.integers(1, min(max_gateways, count)))])
    # Sometimes a node carries the gateway label without a published endpoint: it must plan as a worker.
    flagged = set(draw(st.lists(st.sampled_from(names), max_size=1)))
    nodes = [
        Node(
            name=name,
            ip=IPv4Address(f"172.18.0.{k + 2}"),
            cni_ip=IPv4Address(f"10.{number}.{k}.1"),
            gateway=name in gateways or name in flagged,
        )
        for k, name in enumerate(names)
    ]
    endpoints = [
        Endpoint(cluster=cid, hostname=n.name, private_ip=n.ip, public_ip=draw(_public_ip(number, k)))
        for k, n in enumerate(nodes)
        if n.name in gateways
    ]
    return nodes, endpoints


def _public_ip(number: int, k: int) -> st.SearchStrategy[IPv4Address | None]:
    return st.one_of(st.none(), st.just(IPv4Address(f"198.51.{100 + number}.{k + 2}")))


@st.composite
def _remote_endpoints(draw: st.DrawFn, cid: str, number: int, max_gateways: int) -> list[Endpoint]:
    count = draw(st.integers(1, max_gateways))
    return [
        Endpoint(
            cluster=cid,
            hostname=f"{cid}-gw{k}",
            private_ip=IPv4Address(f"172.{20 + number}.0.{k + 2}"),
            public_ip=draw(_public_ip(number, k)),
        )
        for k in range(count)
    ]


@st.composite
def _config(draw: st.DrawFn) -> Config:
    return Config(
        multi_active=draw(st.booleans()),
        strategy=draw(st.sampled_from(Strategy)),
        underlay_mtu=draw(st.sampled_from((1500, 1450, 9000))),
        resilient=ResilientParams(
            buckets=draw(st.sampled_from((8, 32, 128))),
            idle_timer=draw(st.integers(0, 120)),
            unbalanced_timer=draw(st.integers(0, 60)),
        ),
    )


@st.composite
def _health(draw: st.DrawFn, endpoints: list[Endpoint], local: str, cluster_ids: list[str]) -> Health:
    hostnames = sorted(e.hostname for e in endpoints)
    down = draw(st.lists(st.sampled_from(hostnames), unique=True)) if hostnames else []
    local_gws = sorted(e.hostname for e in endpoints if e.cluster == local)
    remote_ids = sorted(c for c in cluster_ids if c != local)
    reach: dict[str, list[str]] = {}
    for gw in draw(st.lists(st.sampled_from(local_gws), unique=True)) if local_gws else []:
        reach[gw] = draw(st.lists(st.sampled_from(remote_ids), unique=True)) if remote_ids else []
    return Health(down=down, reach=reach)


@st.composite
def snapshots(draw: st.DrawFn, *, max_clusters: int = 4, max_nodes: int = 6, max_gateways: int = 3) -> Snapshot:
    """A valid Snapshot. ``max_gateways=1`` gives every cluster exactly one endpoint."""
    ids = draw(st.lists(st.sampled_from(CLUSTER_NAMES), min_size=1, max_size=max_clusters, unique=True))
    local = ids[0]
    globalnet = draw(st.booleans())
    clusters = [draw(_cluster(cid, number, globalnet)) for number, cid in enumerate(ids, start=1)]
    nodes, endpoints = draw(_local_nodes(local, 1, max_nodes, max_gateways))
    for number, cid in enumerate(ids[1:], start=2):
        endpoints += draw(_remote_endpoints(cid, number, max_gateways))
    return Snapshot(
        local_cluster=local,
        clusters=clusters,
        nodes=nodes,
        endpoints=endpoints,
        config=draw(_config()),
        health=draw(_health(endpoints, local, ids)),
    )


@st.composite
def snapshot_and_node(draw: st.DrawFn, /, **kwargs: int) -> tuple[Snapshot, str]:
    """A Snapshot (see ``snapshots``) and the name of one of its local nodes."""
    snapshot = draw(snapshots(**kwargs))
    return snapshot, draw(st.sampled_from([n.name for n in snapshot.nodes]))
