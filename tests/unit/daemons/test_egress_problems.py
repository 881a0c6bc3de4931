"""The route agent logs what the egress plan could not honour: once per change, not on every sync."""

from __future__ import annotations

from pathlib import Path

import attrs
import yaml
from structlog.testing import capture_logs

from magw.daemons.route_agent.egressgw_problems import EgressGatewayProblems
from magw.lab.planes.daemons import write_broker
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import load_topology
from magw.model import Snapshot
from magw.sources.file.broker import FileBroker
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "lab-egress-gateway.yaml"


def _snapshot(directory: Path) -> Snapshot:
    broker = FileBroker(directory, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None
    return broker.snapshot


def test_a_conflict_is_logged_once_and_its_end_once(tmp_path: Path) -> None:
    write_broker(layout("eg", load_topology(EXAMPLE)), tmp_path)
    second = {"kind": "EgressVIP", "cluster": "east", "name": "again", "vip": "172.17.0.205", "vrid": 90,
              "candidates": ["east-gw1"], "bindings": [{"namespace": "shop"}]}  # fmt: skip
    (tmp_path / "egress@east@vip@again.yaml").write_text(yaml.safe_dump(second))
    snap = _snapshot(tmp_path)
    problems = EgressGatewayProblems("east-w1")
    with capture_logs() as logs:
        first = problems.check(snap)
        again = problems.check(attrs.evolve(snap, local_cluster=snap.local_cluster))  # a replan, same parts
    assert first == again == ("namespace shop is bound to VIPs again and shop; again is used",)
    assert [(e["event"], e["problem"]) for e in logs] == [("route_agent.egress_problem", first[0])]
    (tmp_path / "egress@east@vip@again.yaml").unlink()
    fixed = _snapshot(tmp_path)
    with capture_logs() as logs:
        assert problems.check(fixed) == ()
    assert [e["event"] for e in logs] == ["route_agent.egress_problems_cleared"]


def test_a_cluster_without_vips_has_no_problems(tmp_path: Path) -> None:
    write_broker(layout("eg", load_topology(EXAMPLE)), tmp_path)
    for path in tmp_path.glob("egress@*"):
        path.unlink()
    snap = _snapshot(tmp_path)
    assert snap.egressgw.vips == ()
    with capture_logs() as logs:
        assert EgressGatewayProblems("east-w1").check(snap) == ()
    assert logs == []
