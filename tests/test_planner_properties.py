"""Properties of the planner over random valid snapshots (hypothesis).

The expected paths are computed here by an independent oracle (election and
VTEP derivation written from the spec, with string arithmetic), not with the
planner's own helpers.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Address
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magw.desired.ids import NEXTHOP_ID_MAX, NEXTHOP_ID_MIN
from magw.desired.planner import plan
from magw.desired.state import MAIN_TABLE, DesiredState
from magw.model import Endpoint, Health, Snapshot, Strategy
from tests.strategies import snapshot_and_node, snapshots

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ZERO_MAC = "00:00:00:00:00:00"


# --- the oracle ----------------------------------------------------------------------------------


def oracle_active(snapshot: Snapshot, cluster_id: str) -> list[Endpoint]:
    endpoints = sorted((e for e in snapshot.endpoints if e.cluster == cluster_id), key=lambda e: e.hostname)
    if snapshot.config.multi_active:
        return endpoints
    up = [e for e in endpoints if e.hostname not in snapshot.health.down]
    return (up or endpoints)[:1]


def oracle_vtep(ip: IPv4Address, first_octet: int) -> str:
    return ".".join([str(first_octet), *str(ip).split(".")[1:]])


def oracle_is_gateway(snapshot: Snapshot, name: str) -> bool:
    node = next(n for n in snapshot.nodes if n.name == name)
    return node.gateway and any(e.hostname == name for e in oracle_active(snapshot, snapshot.local_cluster))


def oracle_paths(snapshot: Snapshot, name: str) -> dict[str, tuple[int, set[tuple[str, str]]]]:
    """For each remote CIDR: (table, {(via, dev)}) of the usable gateways (empty set: unreachable)."""
    health = snapshot.health
    gateway = oracle_is_gateway(snapshot, name)
    out: dict[str, tuple[int, set[tuple[str, str]]]] = {}
    for cluster in snapshot.clusters:
        if cluster.id == snapshot.local_cluster:
            continue
        if gateway:
            hops = {
                (oracle_vtep(e.private_ip, 241), "vxlan-tunnel")
                for e in oracle_active(snapshot, cluster.id)
                if health.usable(e.hostname)
            }
        else:
            hops = {
                (oracle_vtep(e.private_ip, 240), "vx-submariner")
                for e in oracle_active(snapshot, snapshot.local_cluster)
                if e.hostname != name and health.usable(e.hostname, cluster.id)
            }
        for dst in cluster.cidrs:
            out[str(dst)] = (100 if gateway else MAIN_TABLE, hops)
    return out


# --- properties ----------------------------------------------------------------------------------


@SETTINGS
@given(snapshot_and_node())
def test_plan_is_deterministic(case: tuple[Snapshot, str]) -> None:
    """The same snapshot (even rebuilt from reversed inputs) gives an equal state and an identical render."""
    snapshot, node = case
    rebuilt = attrs.evolve(
        snapshot,
        clusters=tuple(reversed(snapshot.clusters)),
        nodes=tuple(reversed(snapshot.nodes)),
        endpoints=tuple(reversed(snapshot.endpoints)),
    )
    first, second = plan(snapshot, node), plan(rebuilt, node)
    assert first == second
    assert first.render() == second.render()
    assert json.dumps(first.to_json(), sort_keys=True) == json.dumps(second.to_json(), sort_keys=True)


@SETTINGS
@given(snapshot_and_node())
def test_every_remote_cidr_goes_through_exactly_the_usable_gateways(case: tuple[Snapshot, str]) -> None:
    """Each remote CIDR has one route: through exactly the usable gateways, or unreachable when there is none."""
    snapshot, node = case
    expected = oracle_paths(snapshot, node)
    cni_ip = str(snapshot.node(node).cni_ip)
    routes = plan(snapshot, node).to_json()["routes"]
    assert sorted(r["dst"] for r in routes) == sorted(expected)
    for r in routes:
        table, hops = expected[r["dst"]]
        assert (r["table"], r["metric"]) == (table, 100)
        assert {(h["via"], h["dev"]) for h in r["nexthops"]} == hops
        assert len(r["nexthops"]) == len(hops)
        if hops:
            assert (r["type"], r["src"]) == ("unicast", cni_ip)
            assert {h["weight"] for h in r["nexthops"]} == {1}
        else:
            assert (r["type"], r["src"], r["nhid"]) == ("unreachable", None, None)


def _dangling(state: DesiredState) -> list[str]:
    """Every reference in ``state`` that does not resolve, in words."""
    problems: list[str] = []
    links = {link.name for link in state.links}
    nexthops = {nh.id for nh in state.nexthops}
    groups = {g.id for g in state.groups}
    on_dev = (*state.addresses, *state.neighbors, *state.fdb, *state.nexthops)
    problems += [f"{type(o).__name__} {o.key} on missing {o.dev}" for o in on_dev if o.dev not in links]
    for g in state.groups:
        problems += [f"group {g.id}: missing member {m.id}" for m in g.members if m.id not in nexthops]
        problems += [f"group {g.id}: empty"] if not g.members else []
    for r in state.routes:
        if r.nhid is not None and r.nhid not in nexthops | groups:
            problems.append(f"route {r.dst}: missing nhid {r.nhid}")
        problems += [f"route {r.dst}: path on missing {h.dev}" for h in r.nexthops if h.dev not in links]
    return problems


@SETTINGS
@given(snapshot_and_node())
def test_nothing_references_a_missing_object(case: tuple[Snapshot, str]) -> None:
    """Routes' nhids, group members, and the devices of addresses/neighbors/FDB/nexthops all exist."""
    assert _dangling(plan(*case)) == []


@SETTINGS
@given(snapshot_and_node())
def test_fdb_is_unicast_and_paired_with_neighbors(case: tuple[Snapshot, str]) -> None:
    """No all-zero FDB entry; every neighbor's MAC has exactly one FDB entry on the same device, and back."""
    state = plan(*case)
    assert ZERO_MAC not in {f.mac for f in state.fdb}
    assert sorted((n.dev, n.mac) for n in state.neighbors) == sorted((f.dev, f.mac) for f in state.fdb)


@SETTINGS
@given(snapshot_and_node())
def test_ids_and_objects_follow_the_strategy(case: tuple[Snapshot, str]) -> None:
    """Ids stay in our range; multipath uses no nexthop objects; groups have the strategy's type."""
    snapshot, node = case
    state = plan(snapshot, node)
    ids = [nh.id for nh in state.nexthops] + [g.id for g in state.groups]
    assert [i for i in ids if not NEXTHOP_ID_MIN <= i <= NEXTHOP_ID_MAX] == []
    assert len(set(ids)) == len(ids)
    strategy = snapshot.config.strategy
    unicast = [r for r in state.routes if r.type == "unicast"]
    if strategy is Strategy.MULTIPATH:
        assert (state.nexthops, state.groups) == ((), ())
        assert [r.dst for r in unicast if r.nhid is not None or not r.nexthops] == []
    else:
        expected_type = "resilient" if strategy is Strategy.RESILIENT else "mpath"
        assert [g.id for g in state.groups if g.type != expected_type] == []
        assert [r.dst for r in unicast if r.nhid is None or r.nexthops] == []


@SETTINGS
@given(snapshot_and_node())
def test_nft_rules_reference_existing_sets_and_chains(case: tuple[Snapshot, str]) -> None:
    """The nft table exists iff there is a remote cluster, and its rules use only its own sets and chains."""
    snapshot, node = case
    table = plan(snapshot, node).nft
    assert (table is not None) == bool(snapshot.remote_clusters)
    if table is None:
        return
    sets = {s.name for s in table.sets}
    chains = {c.name for c in table.chains}
    for rule in table.rules:
        assert rule.chain in chains
        refs = {v[1:] for v in _strings(json.loads(rule.expr)) if v.startswith("@")}
        assert refs <= sets


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@SETTINGS
@given(snapshots(max_gateways=1), st.data())
def test_single_gateway_mode_equals_multi_active_with_one_gateway(snapshot: Snapshot, data: st.DataObject) -> None:
    """With one endpoint per cluster, single-gateway and multi-active mode plan the same state for every node."""
    node = data.draw(st.sampled_from([n.name for n in snapshot.nodes]))
    multi = attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, multi_active=True))
    single = attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, multi_active=False))
    assert plan(single, node) == plan(multi, node)


@SETTINGS
@given(snapshot_and_node(), st.data())
def test_failover_with_nexthop_groups_changes_only_groups(case: tuple[Snapshot, str], data: st.DataObject) -> None:
    """Multi-active with groups: a gateway going down changes only groups while every cluster keeps a path."""
    snapshot, node = case
    snapshot = attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, multi_active=True))
    if snapshot.config.strategy is Strategy.MULTIPATH or not snapshot.endpoints:
        return
    victim = data.draw(st.sampled_from([e.hostname for e in snapshot.endpoints]))
    after_health = Health(down=snapshot.health.down | {victim}, reach=dict(snapshot.health.reach))
    before, after = plan(snapshot, node), plan(attrs.evolve(snapshot, health=after_health), node)
    if len(after.groups) != len(before.groups):
        return  # a cluster lost its last path: its routes turn unreachable, which the route test covers
    assert (after.links, after.neighbors, after.fdb, after.nexthops, after.routes, after.nft) == (
        before.links,
        before.neighbors,
        before.fdb,
        before.nexthops,
        before.routes,
        before.nft,
    )


def test_oracle_vtep_matches_the_spec_example() -> None:
    """The oracle itself: 172.18.0.6 -> 240.18.0.6 and 241.18.0.6."""
    assert (oracle_vtep(IPv4Address("172.18.0.6"), 240), oracle_vtep(IPv4Address("172.18.0.6"), 241)) == (
        "240.18.0.6",
        "241.18.0.6",
    )
