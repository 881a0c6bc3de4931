"""A worker's remote clusters share one nexthop group (issue 10): a local gateway going down or coming back
is one group replace whatever the number of remote clusters; a cluster the reach map sets apart gets its
own group and only its routes move. Counted with the real diff, no kernel."""

from __future__ import annotations

from ipaddress import IPv4Network

import attrs

from magw.desired.planner import plan
from magw.model import Cluster, Endpoint
from magw.reconcile.diff import diff
from tests.planner_seed import seed_east, with_health

REMOTES = 20


def many_clusters():  # type: ignore[no-untyped-def]
    snap = seed_east()
    clusters = [snap.cluster("east")]
    endpoints = [e for e in snap.endpoints if e.cluster == "east"]
    for i in range(REMOTES):
        clusters.append(Cluster(id=f"r{i:02d}", pod_cidrs=[IPv4Network(f"10.{100 + i}.0.0/16")], service_cidrs=[]))
        endpoints.append(Endpoint(cluster=f"r{i:02d}", hostname=f"r{i:02d}-gw", private_ip=f"172.30.{i}.4"))
    return attrs.evolve(snap, clusters=clusters, endpoints=endpoints)


def ops_by_kind(before, after) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    out: dict[str, list[str]] = {}
    for op in diff(after, before).ops:
        out.setdefault(op.kind, []).append(op.verb)
    return out


def test_local_gateway_down_and_up_is_one_group_replace() -> None:
    snap = many_clusters()
    before = plan(snap, "e-w1")
    assert len(before.groups) == 1 and len(before.routes) == REMOTES
    down = plan(with_health(snap, down=["e-gw2"]), "e-w1")
    assert ops_by_kind(before, down) == {"groups": ["replace"]}
    assert ops_by_kind(down, before) == {"groups": ["replace"]}


def test_a_cluster_set_apart_by_reach_moves_alone() -> None:
    snap = many_clusters()
    before = plan(snap, "e-w1")
    apart = plan(with_health(snap, reach={"e-gw2": [f"r{i:02d}" for i in range(1, REMOTES)]}), "e-w1")
    # e-gw2 does not reach r00: r00 gets its own group (e-gw1 only); only r00's route moves
    assert len(apart.groups) == 2
    changes = ops_by_kind(before, apart)
    assert changes == {"groups": ["create"], "routes": ["replace"]}
    moved = [op.obj.dst for op in diff(apart, before).ops if op.kind == "routes"]
    assert moved == [IPv4Network("10.100.0.0/16")]
