"""Golden tests: the seed's east/west example planned for a worker and a gateway, per strategy.

The whole rendered state is compared with ``tests/golden/<strategy>-<node>.txt``.
A mismatch fails. To accept a deliberate change, regenerate and review the diff:

    MAGW_REGEN_GOLDEN=1 .venv/bin/pytest tests/unit/desired/test_planner_golden.py
    git diff tests/golden/
"""

from __future__ import annotations

import difflib
import os
from ipaddress import IPv4Address, IPv4Network

import attrs
import pytest

from magw.desired.node.ids import nexthop_id
from magw.desired.node.planner import plan
from magw.desired.render import render_json, render_text
from magw.desired.state import MAIN_TABLE, Route
from magw.model import Strategy
from tests.support.paths import EXAMPLES, GOLDEN
from tests.support.planner_seed import seed_east, with_health

EXAMPLE = EXAMPLES / "seed-east.yaml"
REGEN = os.environ.get("MAGW_REGEN_GOLDEN") == "1"

REMOTE_CIDRS = (IPv4Network("10.2.0.0/16"), IPv4Network("100.2.0.0/16"))
WORKER_VIAS = (IPv4Address("240.18.0.6"), IPv4Address("240.18.0.8"))
GATEWAY_VIAS = (IPv4Address("241.18.0.4"), IPv4Address("241.18.0.9"))


def _route_paths(route: dict[str, object]) -> list[tuple[str, str]]:
    hops = route["nexthops"]
    assert isinstance(hops, list)
    return [(h["via"], h["dev"]) for h in hops]


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.value)
@pytest.mark.parametrize("node", ["e-w1", "e-gw1"])
def test_golden_render(strategy: Strategy, node: str) -> None:
    """The rendered state of e-w1 (worker) and e-gw1 (gateway) equals the golden file, byte for byte."""
    text = render_text(plan(seed_east(strategy), node))
    path = GOLDEN / f"{strategy.value}-{node}.txt"
    if REGEN:
        path.write_text(text)
    expected = path.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "golden", "planned"))
    assert text == expected, f"{path.name} differs (MAGW_REGEN_GOLDEN=1 to accept):\n{diff}"


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.value)
def test_worker_routes_remote_cidrs_through_both_local_gateways(strategy: Strategy) -> None:
    """A worker routes each remote CIDR in the main table through 240.18.0.6 and 240.18.0.8 on vx-submariner."""
    routes = render_json(plan(seed_east(strategy), "e-w1"))["routes"]
    assert [(r["table"], r["dst"], r["metric"], r["src"], r["type"]) for r in routes] == [
        (MAIN_TABLE, str(dst), 100, "10.1.3.1", "unicast") for dst in REMOTE_CIDRS
    ]
    for r in routes:
        assert _route_paths(r) == [(str(v), "vx-submariner") for v in WORKER_VIAS]


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.value)
def test_gateway_routes_remote_cidrs_through_both_remote_gateways(strategy: Strategy) -> None:
    """A gateway's table 100 routes each remote CIDR via 241.18.0.4 and 241.18.0.9, src its CNI IP, metric 100."""
    state = plan(seed_east(strategy), "e-gw1")
    routes = render_json(state)["routes"]
    assert [(r["table"], r["dst"], r["metric"], r["src"], r["type"]) for r in routes] == [
        (100, str(dst), 100, "10.1.1.1", "unicast") for dst in REMOTE_CIDRS
    ]
    for r in routes:
        assert _route_paths(r) == [(str(v), "vxlan-tunnel") for v in GATEWAY_VIAS]
    assert [(r.priority, r.table) for r in state.rules] == [(100, 100)]


def test_resilient_worker_uses_one_group_of_two_nexthop_objects() -> None:
    """Resilient: one nexthop per local gateway, one resilient group for west (the worker's main class: the id
    0x63FFFFFD), routes point at the group."""
    state = plan(seed_east(Strategy.RESILIENT), "e-w1")
    nh_ids = [nexthop_id(v, inter_cluster=False) for v in WORKER_VIAS]
    group_id = 0x63FFFFFD
    assert [(n.id, n.via, n.dev) for n in state.nexthops] == [
        (i, v, "vx-submariner") for i, v in zip(nh_ids, WORKER_VIAS, strict=True)
    ]
    assert [(g.id, g.type, [m.id for m in g.members], g.buckets, g.idle_timer) for g in state.groups] == [
        (group_id, "resilient", nh_ids, 128, 10)
    ]
    assert [r.nhid for r in state.routes] == [group_id, group_id]


def test_failover_of_a_remote_gateway_changes_only_the_group() -> None:
    """w-gw2 down: the gateway keeps both nexthops and its routes; only the group loses a member."""
    before = plan(seed_east(Strategy.RESILIENT), "e-gw1")
    after = plan(with_health(seed_east(Strategy.RESILIENT), down=["w-gw2"]), "e-gw1")
    assert after.nexthops == before.nexthops
    assert after.routes == before.routes
    assert [[m.id for m in g.members] for g in after.groups] == [[nexthop_id(GATEWAY_VIAS[0], inter_cluster=True)]]


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.value)
@pytest.mark.parametrize(
    ("node", "down", "reach"),
    [
        ("e-gw1", ["w-gw1", "w-gw2"], None),  # a gateway: every remote gateway down
        ("e-w1", ["e-gw1", "e-gw2"], None),  # a worker: every local gateway down
        ("e-w1", [], {"e-gw1": [], "e-gw2": []}),  # a worker: no local gateway reaches west
    ],
    ids=["gateway-remote-down", "worker-local-down", "worker-no-reach"],
)
def test_no_usable_gateway_keeps_every_candidate(
    strategy: Strategy, node: str, down: list[str], reach: dict[str, list[str]] | None
) -> None:
    """Fail static: when health allows none of west's gateways, the node plans exactly as if every one were up
    (the same routes, groups and members as the healthy plan), not unreachable routes."""
    healthy = plan(seed_east(strategy), node)
    blind = plan(with_health(seed_east(strategy), down=down, reach=reach), node)
    assert (blind.nexthops, blind.groups, blind.routes) == (healthy.nexthops, healthy.groups, healthy.routes)
    assert {r.type for r in blind.routes} == {"unicast"}


def test_remote_cluster_whose_gateways_are_withdrawn_is_unreachable() -> None:
    """No candidate at all (west withdrew both Endpoints): table 100 holds unreachable routes (no src, no
    path), and there is no group and no nexthop toward west."""
    snapshot = seed_east(Strategy.GROUP)
    withdrawn = attrs.evolve(snapshot, endpoints=[e for e in snapshot.endpoints if e.cluster != "west"])
    state = plan(withdrawn, "e-gw1")
    assert state.routes == tuple(Route(table=100, dst=dst, metric=100, type="unreachable") for dst in REMOTE_CIDRS)
    assert (state.groups, state.nexthops) == ((), ())


def test_reach_map_removes_a_gateway_for_that_cluster_only() -> None:
    """e-gw2 cannot reach west: the worker routes west's CIDRs through e-gw1 alone."""
    state = plan(with_health(seed_east(Strategy.MULTIPATH), reach={"e-gw2": []}), "e-w1")
    for r in render_json(state)["routes"]:
        assert _route_paths(r) == [("240.18.0.6", "vx-submariner")]


def test_single_gateway_mode_elects_the_first_gateway_and_demotes_the_other() -> None:
    """Single-gateway mode: e-gw1 is elected; e-gw2 plans as a worker routing via e-gw1 in the main table."""
    snapshot = seed_east(Strategy.RESILIENT, multi_active=False)
    demoted = plan(snapshot, "e-gw2")
    assert [link.name for link in demoted.links] == ["vx-submariner"]
    assert demoted.rules == ()
    assert {(r.table, r.nhid) for r in demoted.routes} == {(MAIN_TABLE, 0x63FFFFFD)}  # a worker's main class
    assert [(n.via, n.dev) for n in demoted.nexthops] == [(IPv4Address("240.18.0.6"), "vx-submariner")]
    worker = plan(snapshot, "e-w1")
    assert [n.via for n in worker.nexthops] == [IPv4Address("240.18.0.6")]


def test_example_yaml_is_the_golden_scenario() -> None:
    """examples/seed-east.yaml loads to exactly the snapshot the goldens are made from."""
    from magw.snapshot.load import load_snapshot  # the loader is another component; import where it is used

    assert load_snapshot(EXAMPLE) == seed_east(Strategy.RESILIENT)
