"""The planner's memo (magw.desired.node.memo): a plan with a memo equals a plan without one, and reuses by identity.

The oracle is the planner without a memo (every piece computed afresh), which the planner's own tests and
properties check against the spec. What is tested here is only that reuse never shows: for a sequence of
snapshots that keep some Cluster objects (as the file broker does for unchanged documents) and change
health, config, endpoints, nodes or clusters, every memoized plan equals the fresh one.
"""

from __future__ import annotations

from ipaddress import IPv4Address as ip
from ipaddress import IPv4Network

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magw.desired.node.memo import PlanMemo
from magw.desired.node.planner import plan
from magw.desired.state import KINDS, DesiredState
from magw.model import Cluster, Config, Endpoint, Health, Node, Snapshot, Strategy
from tests.support.strategies import snapshot_and_node

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fresh(snapshot: Snapshot, node: str) -> DesiredState | str:
    try:
        return plan(snapshot, node)
    except (KeyError, ValueError) as exc:
        return repr(exc)


def _memoized(snapshot: Snapshot, node: str, memo: PlanMemo) -> DesiredState | str:
    try:
        return plan(snapshot, node, memo=memo)
    except (KeyError, ValueError) as exc:
        return repr(exc)


@st.composite
def _next(draw: st.DrawFn, snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with some of it changed and the rest kept as the very same objects."""
    change = draw(
        st.sampled_from(["health", "strategy", "endpoint", "node", "node_ip", "cluster", "same", "equal_cluster"])
    )
    hostnames = sorted({e.hostname for e in snapshot.endpoints})
    if change == "health":
        down = draw(st.lists(st.sampled_from(hostnames), unique=True)) if hostnames else []
        return attrs.evolve(snapshot, health=Health(down=down))
    if change == "strategy":
        config: Config = attrs.evolve(
            snapshot.config,
            strategy=draw(st.sampled_from(Strategy)),
            multi_active=draw(st.booleans()),
        )
        return attrs.evolve(snapshot, config=config)
    if change == "endpoint" and snapshot.endpoints:
        drop = draw(st.integers(0, len(snapshot.endpoints) - 1))
        return attrs.evolve(snapshot, endpoints=[e for i, e in enumerate(snapshot.endpoints) if i != drop])
    if change == "node" and len(snapshot.nodes) > 1:
        return attrs.evolve(snapshot, nodes=snapshot.nodes[:-1])
    if change == "node_ip":  # same name, another address (its VTEP, neighbor and FDB entry change)
        i = draw(st.integers(0, len(snapshot.nodes) - 1))
        before = snapshot.nodes[i].ip
        if draw(st.booleans()):  # another first octet only: the same VTEP, another underlay address
            after = ip((int(before) & 0x00FFFFFF) | (173 << 24))
        else:
            after = ip(f"172.30.{draw(st.integers(0, 255))}.{draw(st.integers(1, 254))}")
        moved = attrs.evolve(snapshot.nodes[i], ip=after)
        return attrs.evolve(snapshot, nodes=[moved if j == i else n for j, n in enumerate(snapshot.nodes)])
    if change in ("cluster", "equal_cluster"):
        i = draw(st.integers(0, len(snapshot.clusters) - 1))
        old = snapshot.clusters[i]
        extra: tuple[IPv4Network, ...] = ()
        if change == "cluster":  # one more CIDR, maybe overlapping another cluster's (then both plans refuse)
            extra = (IPv4Network(f"{draw(st.integers(1, 250))}.{draw(st.integers(0, 255))}.0.0/16"),)
        new = Cluster(
            id=old.id,
            pod_cidrs=(*old.pod_cidrs, *extra),
            service_cidrs=old.service_cidrs,
            global_cidrs=old.global_cidrs,
        )
        return attrs.evolve(snapshot, clusters=[new if j == i else c for j, c in enumerate(snapshot.clusters)])
    return snapshot


@st.composite
def _sequences(draw: st.DrawFn) -> tuple[list[Snapshot], str]:
    snapshot, node = draw(snapshot_and_node())
    out = [snapshot]
    for _ in range(draw(st.integers(1, 4))):
        out.append(draw(_next(out[-1])))
    return out, node


@SETTINGS
@given(_sequences())
def test_memoized_plans_equal_fresh_plans(case: tuple[list[Snapshot], str]) -> None:
    snapshots, node = case
    memo = PlanMemo()
    for snapshot in snapshots:
        assert _memoized(snapshot, node, memo) == _fresh(snapshot, node)


def test_unchanged_clusters_give_back_the_same_route_tuple_and_changed_ones_do_not() -> None:
    snapshot = _two_cluster_snapshot()
    memo = PlanMemo()
    first = plan(snapshot, "w1", memo=memo)
    cut = attrs.evolve(snapshot, health=Health(reach={"gw1": ["a"]}))  # gw1 no longer reaches b: b through gw2 only
    again = plan(cut, "w1", memo=memo)
    assert again.routes is not first.routes
    nhid = {r.dst: r.nhid for r in again.routes}
    assert nhid[IPv4Network("10.3.0.0/16")] != nhid[IPv4Network("10.2.0.0/16")]  # b left a's group for its own
    assert {r.nhid for r in first.routes} == {nhid[IPv4Network("10.2.0.0/16")]}
    assert again == plan(cut, "w1")
    back = plan(snapshot, "w1", memo=memo)
    assert back == first
    same = plan(attrs.evolve(snapshot, nodes=(*snapshot.nodes,)), "w1", memo=memo)  # nothing under routes changed
    assert same.routes is back.routes
    assert same.nft is not None and back.nft is not None and same.nft.sets[1] is back.nft.sets[1]
    moved = Cluster(id="b", pod_cidrs=[IPv4Network("10.30.0.0/16")], service_cidrs=[IPv4Network("100.3.0.0/16")])
    changed = _with_cluster(snapshot, moved)
    after = plan(changed, "w1", memo=memo)
    assert after.routes is not same.routes
    assert IPv4Network("10.30.0.0/16") in {r.dst for r in after.routes}
    assert IPv4Network("10.3.0.0/16") not in {r.dst for r in after.routes}
    assert after == plan(changed, "w1")


def test_a_plan_that_raises_leaves_the_memo_as_it_was() -> None:
    snapshot = _two_cluster_snapshot()
    memo = PlanMemo()
    first = plan(snapshot, "w1", memo=memo)
    kept = len(memo)
    overlapping = Cluster(id="b", pod_cidrs=[IPv4Network("10.2.0.0/16")], service_cidrs=[IPv4Network("10.99.0.0/16")])
    with pytest.raises(ValueError, match="overlaps"):
        plan(_with_cluster(snapshot, overlapping), "w1", memo=memo)
    assert len(memo) == kept
    assert plan(snapshot, "w1", memo=memo).routes is first.routes


def test_the_memo_keeps_only_the_last_plans_slots() -> None:
    memo = PlanMemo()
    assert memo.get("a", (), lambda: 1) == 1
    with memo.round():
        assert memo.get("b", (), lambda: 2) == 2
    with memo.round():
        assert memo.get("a", (), lambda: 3) == 3  # "a" was not used by the last round: computed again
    obj = object()
    with memo.round():
        memo.get("c", (obj,), lambda: [1])
    with memo.round():
        assert memo.get("c", (object(),), lambda: "other") == "other"  # another object: identity, not equality
    with memo.round():
        memo.get("d", (obj,), lambda: "first", values=(1,))
    with memo.round():
        assert memo.get("d", (obj,), lambda: "second", values=(2,)) == "second"  # values compared by equality
    with memo.round():
        assert memo.get("d", (obj,), lambda: "third", values=(2,)) == "second"


def _with_cluster(snapshot: Snapshot, cluster: Cluster) -> Snapshot:
    """``snapshot`` with the cluster of ``cluster.id`` replaced; the others kept as the same objects."""
    return attrs.evolve(snapshot, clusters=[cluster if c.id == cluster.id else c for c in snapshot.clusters])


def _two_cluster_snapshot() -> Snapshot:
    return Snapshot(
        local_cluster="l",
        clusters=[
            Cluster(id="l", pod_cidrs=[IPv4Network("10.1.0.0/16")], service_cidrs=[IPv4Network("100.1.0.0/16")]),
            Cluster(id="a", pod_cidrs=[IPv4Network("10.2.0.0/16")], service_cidrs=[IPv4Network("100.2.0.0/16")]),
            Cluster(id="b", pod_cidrs=[IPv4Network("10.3.0.0/16")], service_cidrs=[IPv4Network("100.3.0.0/16")]),
        ],
        nodes=[
            Node(name="gw1", ip=ip("172.18.0.2"), cni_ip=ip("10.1.1.1"), gateway=True),
            Node(name="gw2", ip=ip("172.18.0.4"), cni_ip=ip("10.1.3.1"), gateway=True),
            Node(name="w1", ip=ip("172.18.0.3"), cni_ip=ip("10.1.2.1")),
        ],
        endpoints=[
            Endpoint(cluster="l", hostname="gw1", private_ip=ip("172.18.0.2")),
            Endpoint(cluster="l", hostname="gw2", private_ip=ip("172.18.0.4")),
            Endpoint(cluster="a", hostname="a-gw", private_ip=ip("172.31.2.2")),
            Endpoint(cluster="b", hostname="b-gw", private_ip=ip("172.31.3.2")),
        ],
        config=Config(strategy=Strategy.RESILIENT),
    )


@SETTINGS
@given(snapshot_and_node(max_nodes=12))
def test_every_kind_of_a_plan_is_sorted_by_key(case: tuple[Snapshot, str]) -> None:
    """Pieces the planner sorts itself (SortedObjects pass DesiredState unsorted) are in ``.key`` order."""
    snapshot, node = case
    state = _fresh(snapshot, node)
    if isinstance(state, str):
        return
    for kind in KINDS:
        objs = state.of_kind(kind)
        assert list(objs) == sorted(objs, key=lambda o: o.key), kind
