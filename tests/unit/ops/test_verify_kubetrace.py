"""Pure parts of the traced streams of ``magw verify --kubeconfig``: the tracer's and the stream's logs, the
nodes' route and where it breaks, node names that repeat, and the node tracer's guard of the host's namespace
(nothing is loaded when it refuses)."""

from __future__ import annotations

import json

import pytest

from magw.drivers import netns as netns_mod
from magw.ops.verify import gateways, hops, kubetrace, nodetrace
from magw.ops.verify.kubepods import Cluster
from magw.ops.verify.trace import Flow, port_bases


def test_a_tracers_last_seen_line_counts_and_other_lines_do_not() -> None:
    log = "\n".join([
        json.dumps({"event": "tracing", "table": "magw_verify_x"}),
        json.dumps({"event": "seen", "req": [21000], "rep": []}),
        "a stray line",
        json.dumps({"event": "seen", "req": [21000, 21001], "rep": [21001]}),
        json.dumps({"event": "done"}),
    ])  # fmt: skip
    assert kubetrace._seen(log) == ({21000, 21001}, {21001})
    assert kubetrace._seen(json.dumps({"event": "tracing"})) is None


def test_the_streams_result_is_its_last_object_with_flows() -> None:
    doc = {"flows": [{"sport": 21000, "sent": 40, "lost": 0}]}
    assert kubetrace.stream_doc(f"starting\n{json.dumps({'event': 'x'})}\n{json.dumps(doc)}\n") == doc
    assert kubetrace.stream_doc("Traceback ...\n") is None


def test_port_ranges_follow_each_other_and_too_many_flows_are_refused() -> None:
    assert port_bases([32, 4, 4]) == [hops.PORT_LO, hops.PORT_LO + 32, hops.PORT_LO + 36]
    assert port_bases([32, 4], 25000, 25035) == [25000, 25032]
    with pytest.raises(ValueError, match="client ports"):
        port_bases([hops.PORT_HI - hops.PORT_LO, 2])
    with pytest.raises(ValueError, match="more than the 36 client ports"):
        port_bases([32, 5], 25000, 25035)


def test_a_runs_ports_start_anywhere_they_fit_in_its_half() -> None:
    lo, hi = kubetrace.TRACE_PORTS
    assert (hi + 1, hops.PORT_HI) == kubetrace.FAILOVER_PORTS and lo == hops.PORT_LO
    assert kubetrace.ports_of_run(40, (100, 199), lambda n: 0) == (100, 199)
    assert kubetrace.ports_of_run(40, (100, 199), lambda n: n - 1) == (160, 199)  # 160..199: the last 40 ports
    starts = {kubetrace.ports_of_run(40, (100, 199))[0] for _ in range(300)}
    assert min(starts) >= 100 and max(starts) <= 160 and len(starts) > 20
    assert kubetrace.ports_of_run(101, (100, 199)) == (100, 199)  # too many: port_bases refuses it


def test_node_names_repeating_across_clusters_are_refused() -> None:
    east = Cluster(api=None, id="east", gateways=("gw1",), workers=("node1",))  # type: ignore[arg-type]
    west = Cluster(api=None, id="west", gateways=("gw2",), workers=("node1",))  # type: ignore[arg-type]
    with pytest.raises(kubetrace.TraceError, match=r"node names repeat across the clusters \(node1\)"):
        kubetrace._nodes([east, west])
    west.workers = ("node2",)
    assert [n for _, n in kubetrace._nodes([east, west])] == ["gw1", "node1", "gw2", "node2"]


ROUTE = hops.node_route(client="the traced pod on e-wk", client_node="e-wk", local_gateways=["e-gw1", "e-gw2"],
                        remote_gateways=["w-gw1"], server="west/srv", server_node="w-wk", local="east",
                        remote="west")  # fmt: skip


def _flow(sport: int, req: set[str], rep: set[str], *, lost: int = 10) -> Flow:
    return Flow(sport=sport, sent=10, lost=lost, req_seen=frozenset(req), rep_seen=frozenset(rep))


def test_a_flow_that_no_remote_gateway_saw_died_after_the_local_gateway() -> None:
    b = hops.find_break(ROUTE, {"e-wk", "e-gw2"}, set())
    assert b is not None and b.text() == "request died at e-gw2 -> a west gateway (w-gw1)"


def test_a_request_that_reached_the_server_node_but_no_answer_names_the_server() -> None:
    b = hops.find_break(ROUTE, {"e-wk", "e-gw1", "w-gw1", "w-wk"}, set())
    assert b is not None and b.text() == "reply died at w-wk -> west/srv's answer (seen on w-wk)"


def test_a_reply_lost_on_the_last_stretch_names_the_client_node() -> None:
    b = hops.find_break(ROUTE, {"e-wk", "e-gw1", "w-gw1", "w-wk"}, {"w-wk", "w-gw1"})
    assert b is not None and b.text() == "reply died at w-gw1 -> a east gateway (e-gw1|e-gw2)"
    assert hops.find_break(ROUTE, {"e-wk", "e-gw1", "w-gw1", "w-wk"}, {"w-wk", "w-gw1", "e-gw1", "e-wk"}) is None


def test_the_hop_verdict_is_the_commonest_break_and_every_gateway_row_judges_its_own() -> None:
    full = ({"e-wk", "e-gw1", "w-gw1", "w-wk"}, {"w-wk", "w-gw1", "e-gw1", "e-wk"})
    flows = [_flow(21000, *full, lost=0), _flow(21001, {"e-wk", "e-gw2"}, set()),
             _flow(21002, {"e-wk", "e-gw2"}, set())]  # fmt: skip
    assert gateways.hop_verdict(ROUTE, flows) == "request died at e-gw2 -> a west gateway (w-gw1)"
    rows = {r.gateway: r for r in gateways.rows("east -> west", [("e-gw1", "east"), ("e-gw2", "east"),
                                                                    ("w-gw1", "west")], flows, ROUTE)}  # fmt: skip
    assert rows["e-gw1"].ok and not rows["e-gw2"].ok and rows["e-gw2"].dead == 2 and rows["w-gw1"].ok
    assert gateways.hop_verdict(ROUTE, flows[:1]).startswith("none found: 1 traced UDP flows got through every hop")


def test_the_node_tracer_refuses_the_hosts_namespace_and_loads_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_nft(*args: str, stdin: str | None = None) -> str:
        raise AssertionError(f"nft {args} ran after a refusal")

    monkeypatch.setattr(nodetrace, "nft", no_nft)
    for initial in (True, None):
        monkeypatch.setattr(netns_mod, "initial_netns", lambda initial=initial: netns_mod.InitialNetns(
            initial=initial, reason="a test says so"))  # fmt: skip
        assert nodetrace.main(["--seconds", "1"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("nodetrace: refusing to add a trace table to") and err.count("\n") == 1, err
        assert "--allow-init-netns" in err


def test_the_node_tracer_refuses_a_table_not_of_its_own_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        nodetrace.main(["--table", "filter"])
    assert exc.value.code == 2 and "--table: 'filter' is not magw_verify" in capsys.readouterr().err
