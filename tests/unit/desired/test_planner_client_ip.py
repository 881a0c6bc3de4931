"""keep_client_ip (magw.desired.node.clientip): the steer table on gateways, a return table per other gateway on
every node, the narrowed SNAT and the ``client-ip`` chain, and nothing of it when the switch is off."""

from __future__ import annotations

import json
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import attrs
import pytest

from magw.desired.node import clientip
from magw.desired.node.planner import plan
from magw.desired.state import DesiredState
from magw.model import Cni, Health, Snapshot
from magw.snapshot.load import SnapshotError, load_snapshot, parse_snapshot, snapshot_to_doc
from tests.support.paths import EXAMPLES

SNAPSHOT = load_snapshot(EXAMPLES / "client-ip.yaml")


def _routes(state: DesiredState, table: int) -> dict[str, str]:
    return {str(r.dst): str(r.nexthops[0].via) for r in state.routes if r.table == table}


def _client_ip_tables(state: DesiredState) -> set[int]:
    return {r.table for r in state.routes if 11000 <= r.table <= 11014}


def _rules(state: DesiredState) -> dict[int, tuple[int, int | None, int | None]]:
    return {r.priority: (r.table, r.fwmark, r.fwmask) for r in state.rules if r.priority < 100}


def _chain_rules(state: DesiredState, chain: str) -> list[str]:
    assert state.nft is not None
    return [r.expr for r in state.nft.rules if r.chain == chain]


def test_gateway_indexes_are_distinct_small_and_depend_only_on_the_set() -> None:
    names = [f"gw-{i}" for i in range(14)]
    first = clientip.gateway_indexes(names)
    assert sorted(first.values()) == list(range(1, 15))
    assert clientip.gateway_indexes(reversed(names)) == first
    assert clientip.gateway_indexes([*names, "gw-14"]) == {}  # a 15th gateway: the cluster keeps the SNAT


def test_a_gateway_steers_to_every_other_node_whose_pod_cidr_it_knows() -> None:
    state = plan(SNAPSHOT, "e-gw1")
    # VTEPs on vx-submariner are 240 + the node address's last three octets (docs/planner.md)
    assert _routes(state, 11000) == {"10.1.2.0/24": "240.18.0.8", "10.1.3.0/24": "240.18.0.3"}
    indexes = clientip.gateway_indexes(["e-gw1", "e-gw2"])
    other = indexes["e-gw2"]
    assert _routes(state, 11000 + other) == {"0.0.0.0/0": "240.18.0.8"}
    assert _client_ip_tables(state) == {11000, 11000 + other}
    assert _rules(state) == {
        99: (11000, 0x0F000000, 0x0F000000),
        84 + other: (11000 + other, other << 24, 0x0F000000),
    }


def test_a_worker_returns_replies_through_each_gateway_and_steers_nothing() -> None:
    state = plan(SNAPSHOT, "e-w1")
    indexes = clientip.gateway_indexes(["e-gw1", "e-gw2"])
    assert {t: _routes(state, 11000 + i) for t, i in indexes.items()} == {
        "e-gw1": {"0.0.0.0/0": "240.18.0.6"},
        "e-gw2": {"0.0.0.0/0": "240.18.0.8"},
    }
    assert 99 not in _rules(state)
    assert sorted(_rules(state)) == sorted(84 + i for i in indexes.values())
    rules = _chain_rules(state, "client-ip")
    # the gateways' VTEP MACs: 02:53 + the VTEP address (240.18.0.6 -> 02:53:f0:12:00:06)
    assert sum('"02:53:f0:12:00:06"' in r for r in rules) == 1
    assert sum('"02:53:f0:12:00:08"' in r for r in rules) == 1
    assert not any("vxlan-tunnel" in r for r in rules)


def test_every_request_of_a_connection_notes_its_gateway_not_only_the_first() -> None:
    """A flow whose requests move to another gateway keeps its conntrack entry on the backend's node: the mark must
    follow the gateway the requests now come through (the soak's gateway-remove found flows left dark)."""
    rules = [json.loads(r) for r in _chain_rules(plan(SNAPSHOT, "e-w1"), "client-ip")]
    noting = [r for r in rules if any("mangle" in e and e["mangle"]["key"] == {"ct": {"key": "mark"}} for e in r)]
    assert len(noting) == 2  # one per other gateway
    for rule in noting:
        matches = [e["match"] for e in rule if "match" in e]
        assert {"op": "==", "left": {"ct": {"key": "direction"}}, "right": "original"} in matches, rule
        assert not [m for m in matches if m["left"] == {"ct": {"key": "state"}}], rule


def test_the_gateway_snat_stays_only_for_what_was_not_steered() -> None:
    (snat,) = [r for r in _chain_rules(plan(SNAPSHOT, "e-gw1"), "postrouting") if '"snat"' in r and "10.1.1.1" in r]
    assert '"vx-submariner"' in snat and '"vxlan-tunnel"' in snat
    assert '"addr": "10.1.1.0", "len": 24' in snat  # its own pods answer through it anyway
    assert _chain_rules(plan(SNAPSHOT, "e-gw1"), "forward")[0].count("251658240") == 1  # the mark is cleared first


@pytest.mark.parametrize(
    "change",
    [
        {"keep_client_ip": False},
        {"cni": Cni.OVN},
    ],
)
def test_off_or_on_ovn_nothing_of_it_is_planned(change: dict[str, Any]) -> None:
    snapshot = attrs.evolve(SNAPSHOT, config=attrs.evolve(SNAPSHOT.config, **change))
    for node in ("e-gw1", "e-w1"):
        state = plan(snapshot, node, ovn_mgmt_nexthop=IPv4Address("10.1.3.1"))
        assert _client_ip_tables(state) == set()
        assert _rules(state) == {}
        assert state.nft is None or not any(c.name == "client-ip" for c in state.nft.chains)


def test_a_node_pod_cidr_outside_the_cluster_pods_is_not_routed() -> None:
    nodes = tuple(
        attrs.evolve(n, pod_cidrs=(IPv4Network("192.168.7.0/24"),)) if n.name == "e-w1" else n for n in SNAPSHOT.nodes
    )
    state = plan(attrs.evolve(SNAPSHOT, nodes=nodes), "e-gw1")
    assert _routes(state, 11000) == {"10.1.2.0/24": "240.18.0.8"}


def test_the_snapshot_keeps_the_switch_and_the_pod_cidrs_and_refuses_bad_ones() -> None:
    doc = snapshot_to_doc(SNAPSHOT)
    assert doc["keep_client_ip"] is True
    again: Snapshot = parse_snapshot(doc)
    assert again == SNAPSHOT
    off = snapshot_to_doc(attrs.evolve(SNAPSHOT, config=attrs.evolve(SNAPSHOT.config, keep_client_ip=False)))
    assert "keep_client_ip" not in off  # an older build refuses keys it does not know
    with pytest.raises(SnapshotError, match="keep_client_ip"):
        parse_snapshot({**doc, "keep_client_ip": "yes"})
    bad_nodes = [{**n, "pod_cidrs": ["10.1.3.0/33"]} if n["name"] == "e-w1" else n for n in doc["nodes"]]  # type: ignore[attr-defined]
    with pytest.raises(SnapshotError, match="pod_cidrs"):
        parse_snapshot({**doc, "nodes": bad_nodes})


def test_no_return_table_points_at_a_gateway_that_carries_nothing() -> None:
    """Down, cut off from every remote cluster (its WAN lost) or a standby: remote clusters send nothing through
    it, so no return table (the failover tests: nothing routes toward a dead gateway). Its index stays its own."""
    indexes = clientip.gateway_indexes(["e-gw1", "e-gw2"])
    down = attrs.evolve(SNAPSHOT, health=Health(down={"e-gw1"}))
    cut = attrs.evolve(SNAPSHOT, health=Health(reach={"e-gw1": []}))
    standby = attrs.evolve(SNAPSHOT, config=attrs.evolve(SNAPSHOT.config, multi_active=False))  # e-gw1 active
    assert _client_ip_tables(plan(down, "e-w1")) == {11000 + indexes["e-gw2"]}
    assert _client_ip_tables(plan(cut, "e-w1")) == {11000 + indexes["e-gw2"]}
    assert _client_ip_tables(plan(standby, "e-w1")) == {11000 + indexes["e-gw1"]}


def test_return_tables_fail_static_as_the_routes_do() -> None:
    """When health allows no local gateway toward the remote cluster, the worker's routes keep every one (fail
    static), so the return tables keep them too: a connection that came through either still has its replies
    sent back through it, not through the main table's hash."""
    indexes = clientip.gateway_indexes(["e-gw1", "e-gw2"])
    both = {11000 + indexes["e-gw1"], 11000 + indexes["e-gw2"]}
    assert _client_ip_tables(plan(SNAPSHOT, "e-w1")) == both
    for health in (Health(down={"e-gw1", "e-gw2"}), Health(reach={"e-gw1": [], "e-gw2": []})):
        state = plan(attrs.evolve(SNAPSHOT, health=health), "e-w1")
        assert _client_ip_tables(state) == both, health
        assert state.groups == plan(SNAPSHOT, "e-w1").groups  # the routes' groups hold both, as when healthy
