"""Pure parts of ``magw verify --kubeconfig --failover``: which gateway fails and where the stream starts, a
tracer's sets at a moment from the lines it printed on change, and each flow's gateways from them; the nodefail
table drops both ways on magw's devices only."""

from __future__ import annotations

import pytest

from magw.lab.observe.flowwatch import FlowPath
from magw.ops.verify import nodefail
from magw.ops.verify.kubefailover import FailoverInputError, choose, paths, state_at
from magw.ops.verify.kubepods import Cluster


def _cluster(cid: str, gateways: tuple[str, ...], workers: tuple[str, ...] = ()) -> Cluster:
    return Cluster(api=None, id=cid, gateways=gateways, workers=workers)  # type: ignore[arg-type]


def test_the_default_victim_is_the_first_gateway_of_a_cluster_with_two() -> None:
    east, west = _cluster("east", ("e-gw1",), ("e-w1",)), _cluster("west", ("w-gw1", "w-gw2"), ("w-w1",))
    plan = choose([east, west], None)
    assert (plan.victim, plan.local.id, plan.remote.id, plan.client_node) == ("w-gw1", "west", "east", "w-w1")
    east.gateways = ("e-gw1", "e-gw2")
    assert choose([east, west], None).victim == "e-gw1"
    one = _cluster("one", ("o-gw1",), ("o-w1",))
    assert choose([one, _cluster("two", ("t-gw1",))], None).victim == "o-gw1"


def test_a_named_victim_must_be_a_gateway_and_have_a_node_to_send_from_beside_it() -> None:
    east, west = _cluster("east", ("e-gw1", "e-gw2")), _cluster("west", ("w-gw1",), ("w-w1",))
    plan = choose([east, west], "e-gw1")
    assert plan.client_node == "e-gw2"  # no worker: the other gateway sends
    assert choose([east, west], "w-gw1").remote.id == "east"
    with pytest.raises(FailoverInputError, match=r"--victim w-w1 is not a gateway of the clusters \(gateways: "
                       r"east/e-gw1, east/e-gw2, west/w-gw1\)"):  # fmt: skip
        choose([east, west], "w-w1")
    with pytest.raises(FailoverInputError, match="lonely has no node besides l-gw1 to send from"):
        choose([_cluster("lonely", ("l-gw1",)), west], "l-gw1")
    with pytest.raises(FailoverInputError, match="no cluster has a gateway node"):
        choose([_cluster("a", ()), _cluster("b", ())], None)


LINES = [(10.0, {1}, set()), (10.5, {1, 2}, {1}), (12.0, {2}, {2})]


def test_a_tracers_state_at_a_moment_is_its_last_line_by_then() -> None:
    assert state_at(LINES, 9.9) == (set(), set())
    assert state_at(LINES, 10.5) == ({1, 2}, {1})
    assert state_at(LINES, 11.9) == ({1, 2}, {1})
    assert state_at(LINES, 99.0) == ({2}, {2})


def test_each_flows_gateways_come_from_every_tracers_state() -> None:
    tracers = {"gw1": LINES, "gw2": [(10.0, {2}, {2}), (11.0, {1, 2}, {1, 2})]}
    before, after = paths([1, 2], tracers, 10.6), paths([1, 2], tracers, 12.5)

    def rows(found: list[FlowPath]) -> list[tuple[int, set[str], set[str]]]:
        return [(p.sport, set(p.forward), set(p.back)) for p in found]

    assert rows(before) == [(1, {"gw1"}, {"gw1"}), (2, {"gw1", "gw2"}, {"gw2"})]
    assert rows(after) == [(1, {"gw2"}, {"gw2"}), (2, {"gw1", "gw2"}, {"gw1", "gw2"})]


def test_the_fail_table_drops_on_magws_devices_both_ways() -> None:
    text = nodefail.table_text("magw_verify_fail_x", ["vx-submariner", "magw-wg"])
    assert 'iifname { "vx-submariner", "magw-wg" } drop' in text
    assert 'oifname { "vx-submariner", "magw-wg" } drop' in text
    assert "hook prerouting priority -400" in text and "hook postrouting priority -400" in text
    assert text.startswith("add table ip magw_verify_fail_x\ndelete table ip magw_verify_fail_x\n")
