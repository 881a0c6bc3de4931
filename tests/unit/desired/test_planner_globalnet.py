"""The Globalnet datapath planner (docs/globalnet.md): routes, return routes, and the gateway's nft sets and maps.

Expectations are read off ``examples/globalnet-snapshot.yaml`` by hand (three clusters sharing 10.0.0.0/16
and 100.0.0.0/16; east has gateways e-gw1..3 and a worker e-w1).
"""

from __future__ import annotations

import json
from ipaddress import IPv4Address, IPv4Network

import attrs
import pytest

from magw.desired.nft.values import NftTable
from magw.desired.node.planner import plan
from magw.desired.state import DesiredState
from magw.model import Cluster, Health, Snapshot
from magw.model.globalnet import Pod
from magw.snapshot.load import load_snapshot
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "globalnet-snapshot.yaml"


@pytest.fixture(scope="module")
def snap() -> Snapshot:
    return load_snapshot(EXAMPLE)


def _routes(state: DesiredState) -> dict[str, tuple[int, int]]:
    """dst -> (table, metric)."""
    return {str(r.dst): (r.table, r.metric) for r in state.routes}


def _elements(table: NftTable | None, name: str) -> set[object]:
    assert table is not None
    for s in table.sets:
        if s.name == name:
            return set(s.elements)
    for m in table.maps:
        if m.name == name:
            return set(m.elements)
    raise AssertionError(f"no set or map {name}")


def _rule_texts(table: NftTable | None, chain: str) -> list[str]:
    assert table is not None
    return [r.expr for r in table.rules if r.chain == chain]


def test_mixed_clusterset_is_refused_with_one_line(snap: Snapshot) -> None:
    """A clusterset is Globalnet as a whole: one cluster without a global CIDR is refused."""
    west = snap.cluster("west")
    mixed = attrs.evolve(
        snap,
        clusters=[c for c in snap.clusters if c.id != "west"]
        + [Cluster(id="west", pod_cidrs=[IPv4Network("10.9.0.0/16")], service_cidrs=west.service_cidrs)],
    )
    with pytest.raises(ValueError) as err:
        plan(mixed, "e-gw1")
    text = str(err.value)
    assert "\n" not in text
    assert text == (
        "clusters: a clusterset is Globalnet as a whole or not at all: east, north have global_cidrs, west has none"
    )


def test_overlapping_pod_cidrs_are_fine_but_global_cidrs_overlap_nothing(snap: Snapshot) -> None:
    plan(snap, "e-w1")  # all three clusters use 10.0.0.0/16 and 100.0.0.0/16
    north = snap.cluster("north")
    clash = attrs.evolve(north, global_cidrs=[IPv4Network("242.2.128.0/17")])
    bad = attrs.evolve(snap, clusters=[c for c in snap.clusters if c.id != "north"] + [clash])
    with pytest.raises(ValueError, match=r"242.2.128.0/17 of cluster 'north' \(global\) overlaps 242.2.0.0/16"):
        plan(bad, "e-w1")
    into_pods = attrs.evolve(north, global_cidrs=[IPv4Network("10.0.128.0/17")])
    bad = attrs.evolve(snap, clusters=[c for c in snap.clusters if c.id != "north"] + [into_pods])
    with pytest.raises(ValueError, match=r"overlaps 10\.0\.0\.0/16"):
        plan(bad, "e-w1")


def test_worker_routes_remote_global_cidrs_only_and_keeps_pod_sources(snap: Snapshot) -> None:
    state = plan(snap, "e-w1")
    assert _routes(state) == {"242.2.0.0/16": (254, 100), "242.3.0.0/16": (254, 100)}
    assert _elements(state.nft, "remote_cidrs") == {"242.2.0.0/16", "242.3.0.0/16"}
    assert state.nft is not None
    assert {c.name for c in state.nft.chains} == {"postrouting", "forward", "input"}
    post = [json.loads(e) for e in _rule_texts(state.nft, "postrouting")]
    assert post[-1][-1] == {"snat": {"addr": {"payload": {"protocol": "ip", "field": "saddr"}}}}  # null SNAT


def test_gateway_return_routes_one_per_published_address(snap: Snapshot) -> None:
    state = plan(snap, "e-gw1")
    routes = {str(r.dst): r for r in state.routes}
    remote = {f"242.2.0.{i}/32" for i in (1, 2, 3, 4)} | {"242.3.0.1/32", "242.3.0.2/32"}
    local = {f"242.1.0.{i}/32" for i in (3, 4, 9, 10, 14, 5, 6, 11, 12, 15)}
    assert {d for d, r in routes.items() if r.metric == 98} == remote | local
    assert all(routes[d].table == 100 for d in remote | local)
    # each remote /32 goes through its own gateway's nexthop only (w-gw1 = 172.18.0.11, VTEP 241.18.0.11)
    nexthop_via = {nh.id: str(nh.via) for nh in state.nexthops}
    assert nexthop_via[routes["242.2.0.1/32"].nhid or 0] == "241.18.0.11"
    assert nexthop_via[routes["242.2.0.3/32"].nhid or 0] == "241.18.0.12"
    # a local gateway's addresses go to it over vx-submariner (a reply that landed here gets home)
    assert [(str(h.via), h.dev) for h in routes["242.1.0.14/32"].nexthops] == [("240.17.0.12", "vx-submariner")]
    assert "242.1.0.1/32" not in routes  # its own addresses: conntrack here translates them back


def test_a_down_gateway_loses_its_return_routes_and_only_those(snap: Snapshot) -> None:
    down = attrs.evolve(snap, health=Health(down=["w-gw2", "e-gw3"]))
    routes = {str(r.dst) for r in plan(down, "e-gw1").routes}
    assert {"242.2.0.3/32", "242.2.0.4/32", "242.1.0.5/32", "242.1.0.15/32"}.isdisjoint(routes)
    assert {"242.2.0.1/32", "242.2.0.2/32", "242.1.0.3/32", "242.3.0.1/32", "242.2.0.0/16"} <= routes


def test_gateway_maps_follow_precedence_and_are_per_gateway(snap: Snapshot) -> None:
    gw1, gw2 = plan(snap, "e-gw1").nft, plan(snap, "e-gw2").nft
    # db-0 (pod selector, level 1) and batch-1 (namespace, level 3); echo-1 has no GlobalEgressIP (cluster)
    assert _elements(gw1, "gn_egress") == {("10.0.4.3", "242.1.0.13"), ("10.0.4.4", "242.1.0.7")}
    assert _elements(gw2, "gn_egress") == {("10.0.4.3", "242.1.0.14"), ("10.0.4.4", "242.1.0.9")}
    # one-to-one: the exported ClusterIP service and the headless pod web-0 (level 2), same on every gateway
    for table in (gw1, gw2):
        assert _elements(table, "gn_in") == {("242.1.0.16", "100.0.0.10"), ("242.1.0.17", "10.0.1.2")}
        assert _elements(table, "gn_out") == {("100.0.0.10", "242.1.0.16"), ("10.0.1.2", "242.1.0.17")}
        assert _elements(table, "gn_static") == {"100.0.0.10", "10.0.1.2"}
    assert any("242.1.0.1" in e and "242.1.0.2" in e and '"range"' in e for e in _rule_texts(gw1, "postrouting"))
    assert any("242.1.0.3" in e and '"range"' in e for e in _rule_texts(gw2, "postrouting"))


def test_snat_order_is_the_precedence(snap: Snapshot) -> None:
    """svc return, one-to-one null SNAT, the egress map, then the cluster range: the first match wins."""
    texts = _rule_texts(plan(snap, "e-gw1").nft, "postrouting")
    assert [("ct" in t, "@gn_static" in t, "@gn_egress" in t, '"range"' in t) for t in texts] == [
        (True, False, False, False),
        (False, True, False, False),
        (False, False, True, False),
        (False, False, False, True),
    ]


def test_no_cluster_egress_ips_yet_means_marked_traffic_is_dropped(snap: Snapshot) -> None:
    """Before the controller wrote this gateway's addresses, marked traffic must not leave with a local source."""
    gn = attrs.evolve(snap.globalnet, statuses=[(r, s) for r, s in snap.globalnet.statuses if "e-gw1" not in r.name])
    texts = _rule_texts(plan(attrs.evolve(snap, globalnet=gn), "e-gw1").nft, "postrouting")
    assert json.loads(texts[-1])[-1] == {"drop": None}
    assert not any('"range"' in t for t in texts)


def _with_pods(snap: Snapshot, count: int) -> Snapshot:
    """``count`` extra pods in namespace shop (all take the namespace-wide GlobalEgressIP ``all``)."""
    extra = [
        Pod(namespace="shop", name=f"p{i}", ip=IPv4Address(int(IPv4Address("10.0.128.0")) + i), node="e-w1")
        for i in range(count)
    ]
    return attrs.evolve(snap, globalnet=attrs.evolve(snap.globalnet, pods=(*snap.globalnet.pods, *extra)))


def test_rules_do_not_grow_with_pods_only_elements_do(snap: Snapshot) -> None:
    small, big = plan(_with_pods(snap, 10), "e-gw1").nft, plan(_with_pods(snap, 1000), "e-gw1").nft
    assert small is not None and big is not None
    assert small.rules == big.rules and small.chains == big.chains
    assert len(_elements(big, "gn_egress")) - len(_elements(small, "gn_egress")) == 990
    # the tables differ in map elements only: same sets/maps by name and type
    skeleton = [(m.name, m.type, m.map) for m in small.maps]
    assert skeleton == [(m.name, m.type, m.map) for m in big.maps]


def test_host_network_and_pending_pods_get_no_map_entry(snap: Snapshot) -> None:
    pods = [
        Pod(namespace="shop", name="hn", ip=IPv4Address("172.17.0.101"), node="e-w1", host_network=True),
        Pod(namespace="shop", name="nope", ip=None, node="e-w1"),
    ]
    gn = attrs.evolve(snap.globalnet, pods=(*snap.globalnet.pods, *pods))
    keys = {k for k, _ in _elements(plan(attrs.evolve(snap, globalnet=gn), "e-gw1").nft, "gn_egress")}  # type: ignore[misc]
    assert keys == {"10.0.4.3", "10.0.4.4"}


def test_a_pod_selector_beats_the_headless_address_for_egress_only(snap: Snapshot) -> None:
    """web-0 backs an exported headless service (level 2); a GlobalEgressIP selecting it (level 1) wins its
    egress: it leaves by the selector's address, while its global IP still reaches it (both one-to-one maps)."""
    web = next(p for p in snap.globalnet.pods if p.name == "web-0")
    relabelled = attrs.evolve(web, labels=(*web.labels, ("role", "db")))
    pods = tuple(relabelled if p is web else p for p in snap.globalnet.pods)
    table = plan(attrs.evolve(snap, globalnet=attrs.evolve(snap.globalnet, pods=pods)), "e-gw1").nft
    assert ("10.0.1.2", "242.1.0.13") in _elements(table, "gn_egress")
    assert "10.0.1.2" not in _elements(table, "gn_static")
    assert ("242.1.0.17", "10.0.1.2") in _elements(table, "gn_in")
    assert ("10.0.1.2", "242.1.0.17") in _elements(table, "gn_out")


def test_the_tunnels_outer_packets_lose_the_globalnet_mark_first(snap: Snapshot) -> None:
    """The kernel keeps an inner packet's mark on the VXLAN packet built from it: ``output-mark`` clears our bits on
    UDP to either VXLAN port (not to a remote global CIDR) before anything marks, so the outer packet is never
    SNATed to a global IP (the remote gateway's ``vxlan_peers`` guard would drop it, and on ``vx-submariner``, which
    keep_client_ip's service replies take between gateways, the other gateway's ``cluster_nodes`` guard)."""
    rules = [json.loads(r) for r in _rule_texts(plan(snap, "e-gw1").nft, "output-mark")]
    clear, mark = rules
    assert clear[:2] == [
        {"match": {"left": {"payload": {"field": "dport", "protocol": "udp"}}, "op": "==",
                   "right": {"set": [4500, 4800]}}},
        {"match": {"left": {"payload": {"field": "daddr", "protocol": "ip"}}, "op": "!=", "right": "@remote_cidrs"}},
    ]
    mask = clear[2]["mangle"]["value"]["&"][1]
    assert mask & 0xC0000 == 0 and mask | 0xC0000 == 0xFFFFFFFF
    assert mark[-1]["mangle"]["value"]["|"][1] == 0xC0000


def test_vxlan_peers_include_the_remote_gateways_egress_ips_but_not_from_the_tunnel(snap: Snapshot) -> None:
    """Builds before the mark fix send their outer VXLAN from their cluster egress IPs: a rolling upgrade keeps them
    in while those addresses are refused from inside the tunnel, where a remote pod's packets carry them."""
    state = plan(snap, "e-gw1")
    remote = [e for e in snap.endpoints if e.cluster != "east"]
    expected = {str(ip) for e in remote for ip in (e.private_ip, e.underlay_ip, *e.allocated_ips)}
    assert any(e.allocated_ips for e in remote)
    assert _elements(state.nft, "vxlan_peers") == expected
    inputs = [json.loads(r) for r in _rule_texts(state.nft, "input")]
    tunnel = {"match": {"left": {"meta": {"key": "iifname"}}, "op": "==", "right": "vxlan-tunnel"}}
    peers = {"match": {"left": {"payload": {"field": "saddr", "protocol": "ip"}}, "op": "!=", "right": "@vxlan_peers"}}
    assert [tunnel in r for r in inputs].index(True) < [peers in r for r in inputs].index(True)
