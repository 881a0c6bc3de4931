"""Unit tests of the planner's parts: health and reach, single-mode election, roles, VTEPs, input errors."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

import attrs
import pytest

from magw.desired.nft.plan import set_elements
from magw.desired.node.planner import plan
from magw.desired.node.roles import active_endpoints, node_role
from magw.desired.render import render_json, render_text
from magw.desired.state import DesiredState, GroupMember, Nexthop, NexthopGroup, Route, RouteNexthop
from magw.model import Cluster, Config, Endpoint, Health, Node, Snapshot, Strategy
from magw.model.vtep import vtep_interface, vtep_ip, vtep_mac
from tests.support.planner_seed import ENDPOINTS, NODES, seed_east, with_health


def test_health_usable_follows_down_and_reach() -> None:
    """Down hides a gateway everywhere; reach limits a listed gateway to its clusters; unlisted reaches all."""
    health = Health(down={"gw-a"}, reach={"gw-b": ["west"]})
    assert [
        health.usable("gw-a"),
        health.usable("gw-a", "west"),
        health.usable("gw-b"),
        health.usable("gw-b", "west"),
        health.usable("gw-b", "north"),
        health.usable("gw-c", "north"),
    ] == [False, False, True, True, False, True]


def test_single_mode_elects_first_hostname_that_is_up() -> None:
    """Single-gateway mode: the first endpoint by hostname not down; all down: the first anyway."""
    snapshot = seed_east(multi_active=False)
    assert [e.hostname for e in active_endpoints(snapshot, "west")] == ["w-gw1"]
    assert [e.hostname for e in active_endpoints(with_health(snapshot, down=["w-gw1"]), "west")] == ["w-gw2"]
    assert [e.hostname for e in active_endpoints(with_health(snapshot, down=["w-gw1", "w-gw2"]), "west")] == ["w-gw1"]


def test_multi_mode_keeps_every_endpoint_whatever_the_health() -> None:
    """Multi-active mode: every endpoint is active, down or not (health decides usability, not activity)."""
    snapshot = with_health(seed_east(multi_active=True), down=["w-gw1"])
    assert [e.hostname for e in active_endpoints(snapshot, "west")] == ["w-gw1", "w-gw2"]
    assert active_endpoints(snapshot, "nowhere") == ()


def test_gateway_label_without_endpoint_plans_as_worker() -> None:
    """A node labelled gateway but without a published endpoint is a worker and routes via the others."""
    snapshot = attrs.evolve(seed_east(), endpoints=[e for e in ENDPOINTS if e.hostname != "e-gw2"])
    role = node_role(snapshot, "e-gw2")
    assert (role.gateway, [e.hostname for e in role.local_gateways]) == (False, ["e-gw1"])
    state = plan(snapshot, "e-gw2")
    assert ([link.name for link in state.links], state.rules) == (["vx-submariner"], ())
    assert [(r["table"], r["nexthops"]) for r in render_json(state)["routes"]] == [
        (254, [{"via": "240.18.0.6", "dev": "vx-submariner", "weight": 1}])
    ] * 2


def test_worker_never_peers_with_itself() -> None:
    """An endpoint published for a node without the gateway label is not a path for that node."""
    nodes = [attrs.evolve(n, gateway=False) if n.name == "e-gw2" else n for n in NODES]
    snapshot = attrs.evolve(seed_east(Strategy.MULTIPATH), nodes=nodes)
    state = plan(snapshot, "e-gw2")
    assert [str(n.ip) for n in state.neighbors] == ["240.18.0.6"]
    assert {h.via for r in state.routes for h in r.nexthops} == {IPv4Address("240.18.0.6")}


def test_vtep_addresses_and_macs() -> None:
    """240/241 VTEPs replace the first octet; the MAC is 02:53 + the VTEP's 4 bytes, lower-case."""
    ip = IPv4Address("172.18.0.6")
    assert (vtep_ip(ip, inter_cluster=False), vtep_ip(ip, inter_cluster=True)) == (
        IPv4Address("240.18.0.6"),
        IPv4Address("241.18.0.6"),
    )
    assert str(vtep_interface(IPv4Address("10.250.171.205"), inter_cluster=False)) == "240.250.171.205/8"
    assert vtep_mac(IPv4Address("240.18.0.6")) == "02:53:f0:12:00:06"
    assert vtep_mac(IPv4Address("241.250.171.205")) == "02:53:f1:fa:ab:cd"


def test_links_follow_the_spec() -> None:
    """vx-submariner: vni 100, port 4800, local node IP; vxlan-tunnel: vni 1000, port 4500, no local; MTU -50."""
    snapshot = attrs.evolve(seed_east(), config=Config(underlay_mtu=9000))
    links = plan(snapshot, "e-gw2").links
    assert [(x.name, x.vni, x.port, x.mtu, x.mac, x.local, x.learning, x.up) for x in links] == [
        ("vx-submariner", 100, 4800, 8950, "02:53:f0:12:00:08", IPv4Address("172.18.0.8"), False, True),
        ("vxlan-tunnel", 1000, 4500, 8950, "02:53:f1:12:00:08", None, False, True),
    ]


def test_unknown_node_is_a_key_error_naming_it() -> None:
    """plan() for a node that is not in the snapshot raises KeyError naming the node and the known ones."""
    with pytest.raises(KeyError, match=r"node: 'nope' is not a node of cluster 'east' \(known: e-gw1, e-gw2, e-w1\)"):
        plan(seed_east(), "nope")


def test_unknown_local_cluster_is_a_value_error() -> None:
    """A local_cluster missing from clusters is reported as a field error."""
    with pytest.raises(ValueError, match=r"^local_cluster: 'south' is not one of the snapshot's clusters$"):
        plan(attrs.evolve(seed_east(), local_cluster="south"), "e-w1")


def test_overlapping_cluster_cidrs_are_rejected() -> None:
    """Two clusters claiming overlapping CIDRs would make routes ambiguous: ValueError naming both."""
    west = Cluster(id="west", pod_cidrs=[IPv4Network("10.1.128.0/17")], service_cidrs=[IPv4Network("100.2.0.0/16")])
    snapshot = attrs.evolve(seed_east(), clusters=[seed_east().cluster("east"), west])
    with pytest.raises(
        ValueError, match=r"^clusters: 10.1.128.0/17 of cluster 'west' overlaps 10.1.0.0/16 of cluster 'east'$"
    ):
        plan(snapshot, "e-w1")


def test_vtep_collision_is_rejected() -> None:
    """Two remote gateways whose private IPs differ only in the first octet share a VTEP: ValueError."""
    clash = Endpoint(cluster="west", hostname="w-gw3", private_ip=IPv4Address("10.18.0.4"))
    snapshot = attrs.evolve(seed_east(), endpoints=[*ENDPOINTS, clash])
    with pytest.raises(
        ValueError, match=r"'west/w-gw1' and 'west/w-gw3' map to the same VTEP 241.18.0.4 on vxlan-tunnel"
    ):
        plan(snapshot, "e-gw1")


def test_tiny_underlay_mtu_is_rejected() -> None:
    """An underlay MTU that leaves the VXLAN devices below 68 bytes is a config error."""
    with pytest.raises(ValueError, match=r"^config.underlay_mtu: 100 leaves"):
        plan(attrs.evolve(seed_east(), config=Config(underlay_mtu=100)), "e-w1")


def test_no_remote_cluster_means_no_routes_and_no_nft_table() -> None:
    """A clusterset of one: the worker keeps its vx-submariner mesh but plans no routes and no nft table."""
    snapshot = attrs.evolve(
        seed_east(), clusters=[seed_east().cluster("east")], endpoints=[e for e in ENDPOINTS if e.cluster == "east"]
    )
    state = plan(snapshot, "e-w1")
    assert (state.routes, state.nexthops, state.groups, state.nft) == ((), (), (), None)
    assert [str(n.ip) for n in state.neighbors] == ["240.18.0.6", "240.18.0.8"]


def test_remote_cluster_without_endpoints_is_unreachable() -> None:
    """A remote cluster that published no gateway yet gets unreachable routes on a gateway."""
    snapshot = Snapshot(
        local_cluster="east",
        clusters=[seed_east().cluster("east"), seed_east().cluster("west")],
        nodes=[Node(name="e-gw1", ip=IPv4Address("172.18.0.6"), cni_ip=IPv4Address("10.1.1.1"), gateway=True)],
        endpoints=[ENDPOINTS[0]],
    )
    state = plan(snapshot, "e-gw1")
    assert [(r.table, str(r.dst), r.type) for r in state.routes] == [
        (100, "10.2.0.0/16", "unreachable"),
        (100, "100.2.0.0/16", "unreachable"),
    ]
    assert (state.nexthops, state.groups) == ((), ())


def test_set_elements_drop_contained_prefixes_and_print_host_routes_bare() -> None:
    """nft interval sets refuse overlaps: a prefix inside another is dropped; a /32 is a plain address."""
    nets = [IPv4Network(n) for n in ("10.1.0.0/16", "10.1.2.0/24", "10.2.0.0/16", "10.3.3.3/32", "10.1.0.0/16")]
    assert set_elements(nets) == ("10.1.0.0/16", "10.2.0.0/16", "10.3.3.3")


def test_render_json_resolves_group_weights_and_skips_dangling_references() -> None:
    """Route paths come from the group with member weights; an nhid that resolves nowhere gives no path."""
    a, b = IPv4Address("240.0.0.1"), IPv4Address("240.0.0.2")
    state = DesiredState(
        nexthops=[Nexthop(id=1, via=b, dev="vx"), Nexthop(id=2, via=a, dev="vx")],
        groups=[NexthopGroup(id=10, members=(GroupMember(id=1, weight=3), GroupMember(id=2)))],
        routes=[
            Route(table=254, dst=IPv4Network("10.9.0.0/16"), metric=100, nhid=10),
            Route(table=254, dst=IPv4Network("10.8.0.0/16"), metric=100, nhid=99),
            Route(table=254, dst=IPv4Network("10.7.0.0/16"), metric=100, nhid=1),
            Route(
                table=254,
                dst=IPv4Network("10.6.0.0/16"),
                metric=100,
                nexthops=(RouteNexthop(via=b, dev="vx", weight=2),),
            ),
        ],
    )
    routes = {r["dst"]: r["nexthops"] for r in render_json(state)["routes"]}
    assert routes == {
        "10.9.0.0/16": [{"via": "240.0.0.1", "dev": "vx", "weight": 1}, {"via": "240.0.0.2", "dev": "vx", "weight": 3}],
        "10.8.0.0/16": [],
        "10.7.0.0/16": [{"via": "240.0.0.2", "dev": "vx", "weight": 1}],
        "10.6.0.0/16": [{"via": "240.0.0.2", "dev": "vx", "weight": 2}],
    }


def test_render_text_of_weighted_group_and_single_inline_path() -> None:
    """Text form: a weighted member prints as ID,WEIGHT; a route with one inline path prints it on its line."""
    a = IPv4Address("240.0.0.1")
    state = DesiredState(
        nexthops=[Nexthop(id=1, via=a, dev="vx"), Nexthop(id=2, via=IPv4Address("240.0.0.2"), dev="vx")],
        groups=[NexthopGroup(id=10, members=(GroupMember(id=1, weight=3), GroupMember(id=2)))],
        routes=[
            Route(table=100, dst=IPv4Network("10.6.0.0/16"), metric=100, nexthops=(RouteNexthop(via=a, dev="vx"),))
        ],
    )
    assert render_text(state) == (
        "nexthop id 1 via 240.0.0.1 dev vx\n"
        "nexthop id 2 via 240.0.0.2 dev vx\n"
        "nexthop id 10 group 1,3/2\n"
        "route 10.6.0.0/16 table 100 via 240.0.0.1 dev vx metric 100\n"
    )
