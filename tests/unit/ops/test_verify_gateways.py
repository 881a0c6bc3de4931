"""Every gateway check (magw.ops.verify.gateways) and the failover's detection times (magw.ops.verify.failover)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from magw.lab.build.state import LabState
from magw.lab.errors import LabInputError
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import parse_topology
from magw.ops.verify import gateways
from magw.ops.verify.failover import _ends, detections
from magw.ops.verify.labref import Lab
from magw.ops.verify.trace import Flow
from tests.unit.ops.test_verify_hops import ROUTE

GWS = [("east-gw1", "east"), ("east-gw2", "east"), ("west-gw1", "west"), ("west-gw2", "west")]


def flow(sport: int, there: set[str], back: set[str], lost: int = 0) -> Flow:
    return Flow(sport=sport, sent=40, lost=lost, req_seen=frozenset(there), rep_seen=frozenset(back))


def good(sport: int, lgw: str, rgw: str) -> Flow:
    return flow(sport, {"east-w1", lgw, rgw, "west-w1", "west-w1-p1"}, {"west-w1", rgw, lgw, "east-w1", "east-w1-p1"})


def test_every_gateway_carried_and_nothing_died() -> None:
    flows = [good(21000, "east-gw1", "west-gw1"), good(21001, "east-gw2", "west-gw2")]
    rows = gateways.rows("east -> west", GWS, flows, ROUTE)
    assert [(r.gateway, r.toward, r.back, r.dead, r.ok) for r in rows] == [
        ("east-gw1", 1, 1, 0, True),
        ("east-gw2", 1, 1, 0, True),
        ("west-gw1", 1, 1, 0, True),
        ("west-gw2", 1, 1, 0, True),
    ]


def test_a_gateway_that_carried_nothing_fails() -> None:
    flows = [good(21000, "east-gw1", "west-gw1"), good(21001, "east-gw1", "west-gw1")]
    rows = {r.gateway: r for r in gateways.rows("east -> west", GWS, flows, ROUTE)}
    assert not rows["east-gw2"].ok and rows["east-gw2"].text().startswith("carried none of the 2 flows")
    assert rows["east-gw1"].ok


def test_flows_dying_behind_a_gateway_name_it_and_the_hop() -> None:
    dead = flow(21001, {"east-w1", "east-gw2"}, set(), lost=40)
    flows = [good(21000, "east-gw1", "west-gw1"), dead]
    rows = {r.gateway: r for r in gateways.rows("east -> west", GWS, flows, ROUTE)}
    assert not rows["east-gw2"].ok
    assert rows["east-gw2"].dead == 1
    assert rows["east-gw2"].hops == ("request died at east-gw2 -> a west gateway (west-gw1|west-gw2) (1)",)
    assert rows["east-gw1"].ok
    # a flow west-gw1 carried toward the server whose reply died right after east-gw1 counts against east-gw1
    reply_dead = flow(
        21003,
        {"east-w1", "east-gw1", "west-gw1", "west-w1", "west-w1-p1"},
        {"west-w1", "west-gw1", "east-gw1"},
        lost=40,
    )
    rows = {r.gateway: r for r in gateways.rows("east -> west", GWS, [*flows, reply_dead], ROUTE)}
    assert rows["west-gw1"].ok and rows["west-gw1"].elsewhere == 1  # it carried the flow, which died elsewhere
    assert rows["east-gw1"].dead == 1 and not rows["east-gw1"].ok
    assert rows["east-gw1"].hops == ("reply died at east-gw1 -> east-w1 (1)",)
    # ... and one that died after a hop that is no gateway counts against every gateway that carried it
    at_pod = flow(21004, {"east-w1", "east-gw2", "west-gw2", "west-w1"}, set(), lost=40)
    rows = {
        r.gateway: r for r in gateways.rows("east -> west", GWS, [good(21000, "east-gw1", "west-gw1"), at_pod], ROUTE)
    }
    assert [rows[g].ok for g in ("east-gw1", "east-gw2", "west-gw1", "west-gw2")] == [True, False, True, False]
    assert rows["west-gw2"].hops == ("request died at west-w1 -> west-w1-p1 (1)",)
    # a flow that lost only part of its datagrams is not dead
    partly = flow(
        21002,
        {"east-w1", "east-gw2", "west-gw2", "west-w1", "west-w1-p1"},
        {"west-w1", "west-gw2", "east-gw2", "east-w1", "east-w1-p1"},
        lost=3,
    )
    assert not partly.dead


def _status(*transitions: dict[str, object]) -> dict[str, object]:
    return {"health": {"peers": [], "transitions": list(transitions)}}


def test_detections_since_the_failure_only_for_the_victim() -> None:
    t0 = datetime(2026, 11, 28, 20, 0, 0, tzinfo=UTC).timestamp()

    def at(offset: float) -> str:
        return datetime.fromtimestamp(t0 + offset, UTC).isoformat(timespec="milliseconds")

    statuses = {
        "east-w1": _status(
            {"at": at(-30), "peer": "east-gw1", "what": "alive", "old": "up", "new": "down", "detection_seconds": 9.0},
            {"at": at(0.2), "peer": "east-gw1", "what": "alive", "old": "up", "new": "down", "detection_seconds": 0.21},
            {"at": at(0.3), "peer": "east-gw2", "what": "alive", "old": "up", "new": "down", "detection_seconds": 0.3},
            {"at": at(5), "peer": "east-gw1", "what": "alive", "old": "down", "new": "up"},
        ),
        "west-gw1": _status(
            {
                "at": at(0.25),
                "peer": "east-gw1",
                "what": "alive",
                "old": "up",
                "new": "down",
                "detection_seconds": 0.18,
            },
        ),
        "west-w1": None,
    }
    found = detections(statuses, "east-gw1", t0)
    assert [(d.node, d.seconds) for d in found] == [("east-w1", 0.21), ("west-gw1", 0.18)]


def _lab(clusters: list[dict[str, object]]) -> Lab:
    topo = parse_topology({"clusters": clusters})
    st = LabState(name="tunit2", topology=topo, phase="up", daemons=True, token="x")
    return Lab(st=st, layout=layout("tunit2", topo))


def test_the_failover_pair_keeps_off_the_victims_node() -> None:
    lab = _lab(
        [
            {"id": "east", "gateways": 1, "workers": 1, "pods_per_node": 1},
            {"id": "west", "gateways": 2, "workers": 0, "pods_per_node": 1},
        ]
    )
    client, server, address = _ends(lab, "west-gw1", "west")
    assert (client.name, server.name, str(address.ip)) == ("west-gw2-p1", "east-w1-p1", "10.1.2.2")
    client, server, _ = _ends(lab, "east-gw1", "east")
    assert (client.name, server.name) == ("east-w1-p1", "west-gw1-p1")


def test_the_failover_pair_needs_a_pod_off_the_victim() -> None:
    lab = _lab(
        [
            {"id": "east", "gateways": 1, "workers": 0, "pods_per_node": 1},
            {"id": "west", "gateways": 1, "workers": 0, "pods_per_node": 1},
        ]
    )
    with pytest.raises(LabInputError, match=r"^verify --failover: no pair of pods of east and west off east-gw1$"):
        _ends(lab, "east-gw1", "east")
