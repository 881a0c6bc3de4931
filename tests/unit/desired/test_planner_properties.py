"""Properties of the planner over random valid snapshots (hypothesis).

The expected paths are computed here by an oracle written from the spec
(docs/planner.md "Roles" and "Routes", docs/health.md "From states to the
planner"), which imports nothing from magw but the plain data values it reads
(``Snapshot``, ``Endpoint``, ...): not ``Health.usable``, ``Cluster.cidrs``,
``Snapshot.node``/``remote_clusters``, nor the planner's constants. Election,
usability, VTEPs (string arithmetic), tables and id ranges are all restated
below, so a bug in a helper the planner shares cannot hide in the oracle too.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Address
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magw.desired.node.planner import plan
from magw.desired.render import render_json, render_text
from magw.desired.state import DesiredState
from magw.model import Cluster, Endpoint, Health, Snapshot, Strategy
from tests.support.strategies import snapshot_and_node, snapshots

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ZERO_MAC = "00:00:00:00:00:00"


# --- the oracle: docs/planner.md and docs/health.md restated, nothing of magw's logic ----------------

MAIN_TABLE = 254  # workers route in the main table
GATEWAY_TABLE = 100  # gateways route in table 100 (rule 100)
METRIC = 100
ID_MIN, ID_MAX = 0x60000000, 0x63FFFFFF  # "Id layout": 0x60xxxxxx .. 0x63xxxxxx
NEXTHOP_BASE = {"vx-submariner": 0x60000000, "vxlan-tunnel": 0x61000000}
GROUP_BASE = {"mpath": 0x62000000, "resilient": 0x63000000}


def oracle_usable(health: Health, hostname: str, cluster_id: str | None = None) -> bool:
    """ "Usable for a cluster": not in ``down``, and the reach map, if it lists the gateway, includes the
    cluster. Without a cluster (a gateway's remote peers), only ``down`` counts."""
    if hostname in set(health.down):
        return False
    reach = {gw: set(clusters) for gw, clusters in health.reach}
    return cluster_id is None or hostname not in reach or cluster_id in reach[hostname]


def oracle_active(snapshot: Snapshot, cluster_id: str) -> list[Endpoint]:
    """Multi-active: every endpoint of the cluster. Single-gateway: the first by hostname not down, or the first."""
    endpoints = sorted((e for e in snapshot.endpoints if e.cluster == cluster_id), key=lambda e: e.hostname)
    if snapshot.config.multi_active:
        return endpoints
    up = [e for e in endpoints if e.hostname not in set(snapshot.health.down)]
    return (up or endpoints)[:1]


def oracle_vtep(ip: IPv4Address, first_octet: int) -> str:
    return ".".join([str(first_octet), *str(ip).split(".")[1:]])


def oracle_cidrs(cluster: Cluster) -> set[str]:
    """What is routed toward a cluster: its global CIDRs with Globalnet (pod and service CIDRs may be anyone's
    then), else its pod and service CIDRs."""
    if cluster.global_cidrs:
        return {str(n) for n in cluster.global_cidrs}
    return {str(n) for n in (*cluster.pod_cidrs, *cluster.service_cidrs)}


def oracle_remote_ids(snapshot: Snapshot) -> list[str]:
    return sorted(c.id for c in snapshot.clusters if c.id != snapshot.local_cluster)


def oracle_cni_ip(snapshot: Snapshot, name: str) -> str:
    return next(str(n.cni_ip) for n in snapshot.nodes if n.name == name)


def oracle_is_gateway(snapshot: Snapshot, name: str) -> bool:
    """A node plans as a gateway iff it carries the label and is an active gateway of the local cluster."""
    node = next(n for n in snapshot.nodes if n.name == name)
    return node.gateway and any(e.hostname == name for e in oracle_active(snapshot, snapshot.local_cluster))


def oracle_candidates(snapshot: Snapshot, name: str, cluster_id: str) -> list[tuple[Endpoint, str, str]]:
    """(endpoint, via, dev) of every gateway a route toward ``cluster_id`` could use, whatever its health."""
    if oracle_is_gateway(snapshot, name):
        return [(e, oracle_vtep(e.private_ip, 241), "vxlan-tunnel") for e in oracle_active(snapshot, cluster_id)]
    local = oracle_active(snapshot, snapshot.local_cluster)
    return [(e, oracle_vtep(e.private_ip, 240), "vx-submariner") for e in local if e.hostname != name]


def oracle_hops(snapshot: Snapshot, name: str, cluster_id: str) -> set[tuple[str, str]]:
    """(via, dev) of the gateways usable toward ``cluster_id``: a gateway's remote peers are filtered by
    ``down`` only, a worker's local gateways also by the reach map; when that leaves none, every candidate
    (fail static)."""
    reach_key = None if oracle_is_gateway(snapshot, name) else cluster_id
    candidates = oracle_candidates(snapshot, name, cluster_id)
    usable = {(via, dev) for e, via, dev in candidates if oracle_usable(snapshot.health, e.hostname, reach_key)}
    return usable or {(via, dev) for _, via, dev in candidates}


def oracle_paths(snapshot: Snapshot, name: str) -> dict[str, tuple[int, set[tuple[str, str]]]]:
    """For each remote CIDR: (table, {(via, dev)}) of the usable gateways (empty set: no candidate, unreachable)."""
    table = GATEWAY_TABLE if oracle_is_gateway(snapshot, name) else MAIN_TABLE
    return {
        dst: (table, oracle_hops(snapshot, name, cluster.id))
        for cluster in snapshot.clusters
        if cluster.id != snapshot.local_cluster
        for dst in oracle_cidrs(cluster)
    }


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
    assert render_text(first) == render_text(second)
    assert json.dumps(render_json(first), sort_keys=True) == json.dumps(render_json(second), sort_keys=True)


@SETTINGS
@given(snapshot_and_node())
def test_every_remote_cidr_goes_through_exactly_the_usable_gateways(case: tuple[Snapshot, str]) -> None:
    """Each remote CIDR has one route: through exactly the usable gateways; through every candidate when none is
    usable (fail static); unreachable when there is no candidate at all."""
    snapshot, node = case
    expected = oracle_paths(snapshot, node)
    cni_ip = oracle_cni_ip(snapshot, node)
    routes = render_json(plan(snapshot, node))["routes"]
    assert sorted(r["dst"] for r in routes) == sorted(expected)
    for r in routes:
        table, hops = expected[r["dst"]]
        assert (r["table"], r["metric"]) == (table, METRIC)
        assert {(h["via"], h["dev"]) for h in r["nexthops"]} == hops
        assert len(r["nexthops"]) == len(hops)
        if hops:
            assert (r["type"], r["src"]) == ("unicast", cni_ip)
            assert {h["weight"] for h in r["nexthops"]} == {1}
        else:
            assert (r["type"], r["src"], r["nhid"]) == ("unreachable", None, None)


def _low24(via: str) -> int:
    _, b, c, d = (int(part) for part in via.split("."))
    return b << 16 | c << 8 | d


@SETTINGS
@given(snapshot_and_node())
def test_nexthop_objects_and_groups_follow_the_candidates(case: tuple[Snapshot, str]) -> None:
    """With nexthop objects: one per candidate gateway (usable or not), id = the device's base | the low 24
    bits of the VTEP; groups of the strategy's type (0x62/0x63), each cluster's routes naming one. On a gateway
    one group per remote cluster with a usable gateway, shared by no other cluster; on a worker one per class
    of clusters with the same usable set: the class with most clusters (ties: more members, then the first
    cluster id) has the id base | 0xFFFFFD, every other class one of its own (docs/planner.md, "Strategies")."""
    snapshot, node = case
    strategy = snapshot.config.strategy
    if strategy is Strategy.MULTIPATH:
        return
    state = render_json(plan(snapshot, node))
    expected = {
        NEXTHOP_BASE[dev] | _low24(via): (via, dev)
        for cid in oracle_remote_ids(snapshot)
        for _, via, dev in oracle_candidates(snapshot, node, cid)
    }
    assert {nh["id"]: (nh["via"], nh["dev"]) for nh in state["nexthops"]} == expected
    base = GROUP_BASE["resilient" if strategy is Strategy.RESILIENT else "mpath"]
    assert [g["id"] for g in state["groups"] if g["id"] & 0xFF000000 != base] == []
    nhid_of = {
        cluster.id: {r["nhid"] for r in state["routes"] if r["dst"] in oracle_cidrs(cluster)}
        for cluster in snapshot.clusters
        if cluster.id != snapshot.local_cluster and oracle_hops(snapshot, node, cluster.id)
    }
    assert [cid for cid, ids in nhid_of.items() if len(ids) != 1] == []
    group_of = {cid: next(iter(ids)) for cid, ids in nhid_of.items()}
    assert sorted(set(group_of.values())) == sorted(g["id"] for g in state["groups"])
    main_id = base | 0xFFFFFD
    if oracle_is_gateway(snapshot, node):
        assert len(set(group_of.values())) == len(group_of)
        assert main_id not in group_of.values()
        return
    by_set: dict[frozenset[tuple[str, str]], list[str]] = {}
    for cid in sorted(group_of):
        by_set.setdefault(frozenset(oracle_hops(snapshot, node, cid)), []).append(cid)
    ids_by_class = [{group_of[c] for c in clusters} for clusters in by_set.values()]
    assert [ids for ids in ids_by_class if len(ids) != 1] == []
    assert len({next(iter(ids)) for ids in ids_by_class}) == len(by_set)
    if by_set:
        main = min(by_set, key=lambda hops: (-len(by_set[hops]), -len(hops), by_set[hops][0]))
        assert {c for c, gid in group_of.items() if gid == main_id} == set(by_set[main])


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
    assert [i for i in ids if not ID_MIN <= i <= ID_MAX] == []
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
    """The nft table exists iff there is a remote cluster, and its rules use only its own sets, maps and chains."""
    snapshot, node = case
    table = plan(snapshot, node).nft
    assert (table is not None) == bool(oracle_remote_ids(snapshot))
    if table is None:
        return
    sets = {s.name for s in table.sets} | {m.name for m in table.maps}
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
    """Multi-active with groups: a gateway going down (or, read backwards, coming back) changes only groups, also
    when it was a cluster's last usable one (fail static keeps every candidate then). On a worker without a
    reach map (every remote cluster uses the same local gateways: the steady state) that is one group, whatever
    the number of clusters."""
    snapshot, node = case
    snapshot = attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, multi_active=True))
    if snapshot.config.strategy is Strategy.MULTIPATH or not snapshot.endpoints:
        return
    worker = not oracle_is_gateway(snapshot, node)
    if worker:  # a reach map can split the clusters into classes, which a failover may merge (moving routes)
        snapshot = attrs.evolve(snapshot, health=Health(down=snapshot.health.down))
    victim = data.draw(st.sampled_from([e.hostname for e in snapshot.endpoints]))
    after_health = Health(down=snapshot.health.down | {victim}, reach=dict(snapshot.health.reach))
    before, after = plan(snapshot, node), plan(attrs.evolve(snapshot, health=after_health), node)
    if worker:
        assert len(before.groups) <= 1
    assert (after.links, after.neighbors, after.fdb, after.nexthops, after.routes, after.nft) == (
        before.links,
        before.neighbors,
        before.fdb,
        before.nexthops,
        before.routes,
        before.nft,
    )


def test_oracle_usable_follows_the_spec_cases() -> None:
    """The oracle itself: down is never usable; a gateway the reach map lists is usable only for the clusters
    listed; one it does not list reaches every cluster; without a cluster only down counts."""
    health = Health(down={"gw-down"}, reach={"gw-west": ["west"], "gw-none": [], "gw-down": ["west"]})
    cases = [
        ("gw-down", "west", False),
        ("gw-down", None, False),
        ("gw-west", "west", True),
        ("gw-west", "north", False),
        ("gw-west", None, True),
        ("gw-none", "west", False),
        ("gw-free", "west", True),
    ]
    assert [(gw, cid, oracle_usable(health, gw, cid)) for gw, cid, _ in cases] == cases


def test_oracle_vtep_matches_the_spec_example() -> None:
    """The oracle itself: 172.18.0.6 -> 240.18.0.6 and 241.18.0.6."""
    assert (oracle_vtep(IPv4Address("172.18.0.6"), 240), oracle_vtep(IPv4Address("172.18.0.6"), 241)) == (
        "240.18.0.6",
        "241.18.0.6",
    )
