"""Which pods ``magw benchmark`` pairs (magw.ops.bench.run.plan_pairs), and a placement the topology lacks is
skipped, not failed (the table and the exit status)."""

from __future__ import annotations

import subprocess

import pytest

from magw.lab.build.state import LabState
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import parse_topology
from magw.ops.bench import render
from magw.ops.bench import run as run_module
from magw.ops.bench.run import latency, plan_pairs
from magw.ops.verify.labref import Addressing, Lab


def _lab(clusters: list[dict[str, object]]) -> Lab:
    topo = parse_topology({"clusters": clusters})
    return Lab(
        st=LabState(name="tunit3", topology=topo, phase="up", daemons=True, token="x"), layout=layout("tunit3", topo)
    )


def test_gateways_and_pods_placements() -> None:
    lab = _lab(
        [
            {"id": "east", "gateways": 2, "workers": 1, "pods_per_node": 2},
            {"id": "west", "gateways": 2, "workers": 2, "pods_per_node": 1},
        ]
    )
    gw, pods = plan_pairs(lab, Addressing(lab), [("east", "west")], ("gateways", "pods"))
    assert (gw.client.name, gw.server and gw.server.name, str(gw.address and gw.address.ip)) == (
        "east-gw1-p1",
        "west-gw1-p1",
        "10.2.1.2",
    )
    assert (pods.client.name, pods.server and pods.server.name) == ("east-w1-p1", "west-w1-p1")
    assert gw.address is not None and gw.address.via == "pod IP"


def test_a_cluster_without_workers_skips_the_pods_placement() -> None:
    lab = _lab(
        [
            {"id": "east", "gateways": 1, "workers": 1, "pods_per_node": 1},
            {"id": "west", "gateways": 2, "workers": 0, "pods_per_node": 1},
        ]
    )
    (pair,) = plan_pairs(lab, Addressing(lab), [("east", "west")], ("pods",))
    assert pair.server is None and pair.absent and pair.problem == "cluster west has no pod on a worker"
    row = latency(pair, proto="udp", count=1, timeout=1.0, max_seconds=1.0)  # no process: nothing to measure
    assert row.skipped and row.ok
    text = render.table("latency", [row])
    assert "SKIPPED pods east-w1-p1@east-w1 -> -: cluster west has no pod on a worker" in text
    assert render.report_json("latency", "tunit3", [row], {})["ok"] is True


def test_iperf3_takes_the_first_port_nothing_listens_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another iperf3 (a second benchmark on the same lab) on 5201 and 5202: this one listens on 5203."""
    lab = _lab([{"id": "east", "gateways": 1, "workers": 0, "pods_per_node": 1}])
    pod = lab.layout.pods[0]
    listening = "LISTEN 0 5 *:5201 *:*\nLISTEN 0 5 0.0.0.0:5202 0.0.0.0:*\nLISTEN 0 4096 127.0.0.1:9101 0.0.0.0:*\n"
    seen: list[list[str]] = []

    def fake_run(argv: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=listening, stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert run_module._free_port(pod) == 5203
    assert seen and seen[0][-2:] == ["ss", "-Hltn"] and pod.namespace in seen[0]
    listening = "".join(f"LISTEN 0 5 *:{p} *:*\n" for p in range(5201, 5301))
    assert run_module._free_port(pod) is None
