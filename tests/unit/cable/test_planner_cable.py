"""The node planner with ``cable: wireguard``: the gateway's ``magw-wg`` and its peers, ``vxlan-tunnel``
carried through it (underlay = the peer's 242/8 address, MTU less 60 more), gateways without a key left out,
the nft guard rules; workers and VXLAN clustersets unchanged. Every expected value is written out by hand from
the clusterset of tests/unit/cable/data.py."""

from __future__ import annotations

import json
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any

import attrs
import pytest

from magw.desired.cable.values import WgDevice, WgPeer
from magw.desired.node.planner import plan
from magw.desired.render import render_json, render_text
from magw.desired.state import DesiredState, Link
from magw.snapshot.load import parse_snapshot
from tests.unit.cable.data import (
    E_GW1_PUB,
    MTU,
    PORT,
    S_GW1_PUB,
    W_GW1_PUB,
    W_GW2_PUB,
    clusterset_doc,
    endpoint_item,
)

A = IPv4Address
N = IPv4Network

# Each remote gateway: (hostname, inter-cluster VTEP 241/8, inner address 242/8, underlay)
W_GW1 = ("w-gw1", A("241.19.0.4"), A("242.19.0.4"), A("203.0.113.4"))
W_GW2 = ("w-gw2", A("241.19.1.5"), A("242.19.1.5"), A("172.19.1.5"))  # no public IP: the private one
W_GW3 = ("w-gw3", A("241.19.2.7"), A("242.19.2.7"), A("203.0.113.7"))  # backend vxlan, no key
S_GW1 = ("s-gw1", A("241.20.3.9"), A("242.20.3.9"), A("192.0.2.9"))


def planned(doc: dict[str, Any], node: str = "e-gw1") -> DesiredState:
    return plan(parse_snapshot(doc), node)


def link(state: DesiredState, name: str) -> Link:
    return next(k for k in state.links if k.name == name)


def tunnel_fdb_dsts(state: DesiredState) -> set[IPv4Address]:
    return {f.dst for f in state.fdb if f.dev == "vxlan-tunnel"}


def group_vias(state: DesiredState) -> list[set[IPv4Address]]:
    """Per nexthop group, the gateways (by VTEP) it holds."""
    via = {n.id: n.via for n in state.nexthops}
    return [{via[m.id] for m in g.members} for g in state.groups]


def vxlan_doc() -> dict[str, Any]:
    doc = clusterset_doc()
    doc["cable"] = "vxlan"
    return doc


# ----- the WireGuard device ------------------------------------------------------------------------------


def test_the_gateway_plans_magw_wg_with_one_peer_per_keyed_remote_gateway() -> None:
    cable = planned(clusterset_doc()).cable
    assert cable == WgDevice(
        name="magw-wg",
        listen_port=PORT,
        mtu=MTU - 60,
        address=IPv4Interface("242.18.0.6/8"),  # e-gw1's private 172.18.0.6
        peers=(
            WgPeer(
                public_key=W_GW1_PUB,
                owner="west/w-gw1",
                endpoint=A("203.0.113.4"),
                port=PORT,
                allowed_ips=(N("242.19.0.4/32"),),
            ),
            WgPeer(
                public_key=W_GW2_PUB,
                owner="west/w-gw2",
                endpoint=A("172.19.1.5"),
                port=PORT,
                allowed_ips=(N("242.19.1.5/32"),),
            ),
            WgPeer(
                public_key=S_GW1_PUB,
                owner="south/s-gw1",
                endpoint=A("192.0.2.9"),
                port=PORT,
                allowed_ips=(N("242.20.3.9/32"),),
            ),
        ),
    )


def test_peers_are_sorted_by_public_key_and_exclude_the_local_cluster() -> None:
    cable = planned(clusterset_doc()).cable
    assert cable is not None
    keys = [p.public_key for p in cable.peers]
    # by hand: "0dsO..." (s-gw1) < "OVic..." (w-gw1) < "TAT1..." (w-gw2) in code point order
    assert keys == [S_GW1_PUB, W_GW1_PUB, W_GW2_PUB]
    assert E_GW1_PUB not in keys  # its own key is no peer
    assert all(p.owner.split("/")[0] != "east" for p in cable.peers)


def test_the_device_mtu_and_port_follow_the_config() -> None:
    doc = clusterset_doc()
    doc["underlay_mtu"] = 9000
    doc["wireguard_port"] = 443
    cable = planned(doc).cable
    assert cable is not None
    assert (cable.mtu, cable.listen_port) == (8940, 443)
    assert {p.port for p in cable.peers} == {443}
    assert link(planned(doc), "vxlan-tunnel").mtu == 8890


def test_the_default_port_is_51820() -> None:
    doc = clusterset_doc()
    del doc["wireguard_port"]
    cable = planned(doc).cable
    assert cable is not None and cable.listen_port == 51820
    assert {p.port for p in cable.peers} == {51820}


def test_standby_gateways_are_peers_but_not_in_the_group() -> None:
    """Single active gateway: west's active one is w-gw1 (first by name); w-gw2 is a standby, yet a WireGuard
    and vxlan-tunnel peer (the probes reach it), outside the nexthop group."""
    doc = clusterset_doc()
    doc["multi_active_gateway"] = False
    state = planned(doc)
    assert state.cable is not None
    assert {p.owner for p in state.cable.peers} == {"west/w-gw1", "west/w-gw2", "south/s-gw1"}
    assert W_GW2[2] in tunnel_fdb_dsts(state)
    assert sorted(group_vias(state), key=sorted) == sorted([{W_GW1[1]}, {S_GW1[1]}], key=sorted)


def test_a_down_gateway_stays_a_peer() -> None:
    doc = clusterset_doc()
    doc["health"] = {"down": ["w-gw1"]}
    state = planned(doc)
    assert state.cable is not None
    assert "west/w-gw1" in {p.owner for p in state.cable.peers}
    assert W_GW1[2] in tunnel_fdb_dsts(state)


# ----- vxlan-tunnel through the device --------------------------------------------------------------------


def test_vxlan_tunnel_mtu_is_underlay_less_vxlan_and_wireguard() -> None:
    state = planned(clusterset_doc())
    assert link(state, "vxlan-tunnel").mtu == MTU - 110  # 50 VXLAN + 60 WireGuard
    assert link(state, "vx-submariner").mtu == MTU - 50  # intra-cluster VXLAN does not go through WireGuard


def test_vxlan_tunnel_fdb_sends_to_inner_addresses() -> None:
    state = planned(clusterset_doc())
    assert tunnel_fdb_dsts(state) == {W_GW1[2], W_GW2[2], S_GW1[2]}
    # the public IPs are WireGuard's business, never vxlan-tunnel's
    assert not tunnel_fdb_dsts(state) & {W_GW1[3], W_GW2[3], S_GW1[3]}
    # w-gw1's entry: its VTEP MAC (02:53 + 241.19.0.4 in hex) toward its inner address
    entry = next(f for f in state.fdb if f.dev == "vxlan-tunnel" and f.dst == A("242.19.0.4"))
    assert entry.mac == "02:53:f1:13:00:04"


def test_a_gateway_without_a_key_is_no_peer_no_fdb_entry_and_no_group_member() -> None:
    state = planned(clusterset_doc())
    assert state.cable is not None
    assert "west/w-gw3" not in {p.owner for p in state.cable.peers}
    assert W_GW3[2] not in tunnel_fdb_dsts(state) and W_GW3[3] not in tunnel_fdb_dsts(state)
    assert W_GW3[1] not in {n.via for n in state.nexthops}
    assert W_GW3[1] not in {nb.ip for nb in state.neighbors}
    # multi-active: west's group holds w-gw1 and w-gw2, south's s-gw1
    assert sorted(group_vias(state), key=sorted) == sorted([{W_GW1[1], W_GW2[1]}, {S_GW1[1]}], key=sorted)


def test_a_cluster_whose_gateways_have_no_key_is_unreachable() -> None:
    doc = clusterset_doc()
    endpoint_item(doc, "s-gw1").pop("backend")
    endpoint_item(doc, "s-gw1").pop("backend_config")
    state = planned(doc)
    assert state.cable is not None and "south/s-gw1" not in {p.owner for p in state.cable.peers}
    south = {r.dst: r for r in state.routes if r.dst in (N("10.3.0.0/16"), N("100.3.0.0/16"))}
    assert set(south) == {N("10.3.0.0/16"), N("100.3.0.0/16")}
    assert all(r.type == "unreachable" for r in south.values())


def test_a_key_beside_backend_vxlan_makes_no_peer() -> None:
    """A public key beside backend vxlan does not make a WireGuard peer."""
    doc = clusterset_doc()
    endpoint_item(doc, "w-gw3")["backend_config"] = {"publicKey": "wyAxhKTa5l7pigWaAZ+Y2y3wgNm0f2QKl/xPRdIb/08="}
    state = planned(doc)
    assert state.cable is not None and "west/w-gw3" not in {p.owner for p in state.cable.peers}
    assert W_GW3[2] not in tunnel_fdb_dsts(state)


# ----- workers and the VXLAN cable -------------------------------------------------------------------------


def test_a_worker_has_no_device_and_the_usual_mtu() -> None:
    state = planned(clusterset_doc(), "e-w1")
    assert state.cable is None
    assert [k.name for k in state.links] == ["vx-submariner"]
    assert link(state, "vx-submariner").mtu == MTU - 50


def test_the_vxlan_cable_plans_as_before() -> None:
    state = planned(vxlan_doc())
    assert state.cable is None
    assert link(state, "vxlan-tunnel").mtu == MTU - 50
    # every remote gateway is a peer at its underlay address, keyed or not
    assert tunnel_fdb_dsts(state) == {W_GW1[3], W_GW2[3], W_GW3[3], S_GW1[3]}
    assert sorted(group_vias(state), key=sorted) == sorted([{W_GW1[1], W_GW2[1], W_GW3[1]}, {S_GW1[1]}], key=sorted)


def test_the_vxlan_cable_ignores_the_keys_entirely() -> None:
    """The same clusterset with and without the endpoints' WireGuard fields plans the same VXLAN objects."""
    plain = vxlan_doc()
    for e in plain["endpoints"]:
        e.pop("backend", None)
        e.pop("backend_config", None)
    assert planned(vxlan_doc()) == planned(plain)


# ----- duplicate keys --------------------------------------------------------------------------------------


def test_two_remote_gateways_with_one_key_are_refused_naming_both() -> None:
    doc = clusterset_doc()
    endpoint_item(doc, "s-gw1")["backend_config"] = {"publicKey": W_GW1_PUB}
    with pytest.raises(ValueError) as info:
        planned(doc)
    message = str(info.value)
    assert "'west/w-gw1'" in message and "'south/s-gw1'" in message
    assert "same WireGuard public key" in message and "\n" not in message


def test_a_remote_gateway_with_our_own_key_is_refused() -> None:
    doc = clusterset_doc()
    endpoint_item(doc, "w-gw2")["backend_config"] = {"publicKey": E_GW1_PUB}
    with pytest.raises(ValueError) as info:
        planned(doc)
    assert "'east/e-gw1'" in str(info.value) and "'west/w-gw2'" in str(info.value)


def test_a_duplicate_key_does_not_matter_on_a_worker_nor_with_the_vxlan_cable() -> None:
    doc = clusterset_doc()
    endpoint_item(doc, "s-gw1")["backend_config"] = {"publicKey": W_GW1_PUB}
    assert planned(doc, "e-w1").cable is None
    doc["cable"] = "vxlan"
    assert planned(doc).cable is None


# ----- nft --------------------------------------------------------------------------------------------------

WG_DROP = [
    {"match": {"left": {"payload": {"field": "dport", "protocol": "udp"}}, "op": "==", "right": PORT}},
    {"match": {"left": {"payload": {"field": "saddr", "protocol": "ip"}}, "op": "!=", "right": "@wg_peers"}},
    {"drop": None},
]
VXLAN_DROP = [
    {"match": {"left": {"payload": {"field": "dport", "protocol": "udp"}}, "op": "==", "right": 4500}},
    {"match": {"left": {"meta": {"key": "iifname"}}, "op": "!=", "right": "magw-wg"}},
    {"drop": None},
]
NODES_DROP = [
    {"match": {"left": {"payload": {"field": "dport", "protocol": "udp"}}, "op": "==", "right": 4800}},
    {"match": {"left": {"payload": {"field": "saddr", "protocol": "ip"}}, "op": "!=", "right": "@cluster_nodes"}},
    {"drop": None},
]
VXLAN_ACCEPT = [
    {"match": {"left": {"payload": {"field": "dport", "protocol": "udp"}}, "op": "==", "right": {"set": [4500, 4800]}}},
    {"accept": None},
]


def input_rules(state: DesiredState) -> list[Any]:
    assert state.nft is not None
    return [json.loads(r.expr) for r in state.nft.rules if r.chain == "input"]


def test_the_gateway_table_guards_the_wireguard_port_and_plain_vxlan() -> None:
    state = planned(clusterset_doc())
    assert state.nft is not None
    sets = {s.name: s for s in state.nft.sets}
    assert sets["wg_peers"].type == "ipv4_addr"
    assert set(sets["wg_peers"].elements) == {"203.0.113.4", "172.19.1.5", "192.0.2.9"}  # not w-gw3
    # the drops come before the VXLAN accept, or they would never match
    assert input_rules(state) == [NODES_DROP, WG_DROP, VXLAN_DROP, VXLAN_ACCEPT]
    assert "vxlan_peers" not in sets  # the WireGuard guards replace the plain cable's


def test_the_wireguard_guard_follows_the_port() -> None:
    doc = clusterset_doc()
    doc["wireguard_port"] = 12345
    wg = input_rules(planned(doc))[1]
    assert wg[0]["match"]["right"] == 12345


def test_a_worker_and_a_vxlan_gateway_have_no_guard() -> None:
    for state in (planned(clusterset_doc(), "e-w1"), planned(vxlan_doc())):
        assert state.nft is not None
        assert "wg_peers" not in {s.name for s in state.nft.sets}
        assert WG_DROP not in input_rules(state) and VXLAN_DROP not in input_rules(state)
        assert VXLAN_ACCEPT in input_rules(state)


# ----- rendering ----------------------------------------------------------------------------------------------


def test_render_json_and_text_show_the_device_and_peers() -> None:
    state = planned(clusterset_doc())
    cable = render_json(state)["cable"]
    assert cable["name"] == "magw-wg" and cable["mtu"] == MTU - 60 and cable["address"] == "242.18.0.6/8"
    assert cable["peers"][1] == {
        "public_key": W_GW1_PUB,
        "owner": "west/w-gw1",
        "endpoint": "203.0.113.4:51999",
        "allowed_ips": ["242.19.0.4/32"],
    }
    text = render_text(state)
    assert f"wireguard magw-wg listen-port {PORT} mtu {MTU - 60} address 242.18.0.6/8\n" in text
    assert f"wireguard magw-wg peer {W_GW2_PUB} endpoint 172.19.1.5:{PORT} allowed-ips 242.19.1.5/32" in text
    assert "cable" not in render_json(planned(vxlan_doc()))
    assert "wireguard" not in render_text(planned(vxlan_doc()))


def test_states_differing_only_in_the_cable_differ() -> None:
    state = planned(clusterset_doc())
    assert attrs.evolve(state, cable=None) != state
