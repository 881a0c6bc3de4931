"""``magw verify`` and ``magw benchmark``: bad input is one line and exit 2, before any lab is touched; the
verify report names each failing pair and the hop where it died."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Address
from types import SimpleNamespace
from typing import Any

import pytest

from magw.lab.spec.layout import layout
from magw.lab.spec.topology import parse_topology
from magw.lab.verify.connectivity import ConnectivityResult, TrafficTarget
from magw.ops.verify import report, suite
from magw.ops.verify.gateways import GatewayRow
from magw.ops.verify.suite import Cell, SuiteResult, probe_cells
from tests.support.cli import MagwCli
from tests.support.paths import REPO


def test_failover_without_a_tty_and_without_yes_is_refused(magw_cli: MagwCli) -> None:
    done = magw_cli("verify", "--lab", "tnolab1", "--failover", stdin="")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "magw: error: verify: --failover fails a gateway: without a terminal to ask on, add --yes"
    )


def test_kube_failover_asks_first_on_a_terminal_before_any_cluster_is_read() -> None:
    """The kubeconfigs do not exist: had anything been read, the error would be about them."""
    primary, secondary = os.openpty()
    try:
        os.write(primary, b"n\n")
        done = subprocess.run([*MagwCli().argv, "verify", "--kubeconfig", "/nonexistent/a", "--kubeconfig",
                               "/nonexistent/b", "--failover", "--victim", "gw2", "--failover-duration", "4"],
                              stdin=secondary, capture_output=True, text=True, timeout=60, cwd=REPO)  # fmt: skip
    finally:
        os.close(primary)
        os.close(secondary)
    assert done.returncode == 2, done.stderr
    assert "--failover: gateway gw2 loses its datapath (magw's devices drop every packet) for about 6 s" in done.stderr
    assert done.stderr.strip().endswith("magw: error: verify: --failover: not confirmed")
    assert done.stdout == ""


def test_the_lab_is_required_and_must_exist(magw_cli: MagwCli) -> None:
    done = magw_cli("verify", stdin="")
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "magw: error: verify: --lab NAME or --kubeconfig (twice or more) is required",
    )
    done = magw_cli("benchmark", "latency", "--lab", "tnolab1", stdin="")
    assert done.returncode == 2
    assert done.stderr.startswith("magw: error: benchmark: no lab named 'tnolab1'")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["verify", "--kubeconfig", "/a"], "verify: --kubeconfig: give two or more clusters' kubeconfigs"),
        (["verify", "--kubeconfig", "/a", "--kubeconfig", "/b", "--lab", "x"], "verify: --lab and --kubeconfig"),
        (["verify", "--kubeconfig", "/a", "--kubeconfig", "/b", "--client", "east-w1-p0"],
         "verify: --client: only with --lab"),
        (["verify", "--kubeconfig", "/a", "--kubeconfig", "/b", "--failover"],
         "verify: --failover fails a gateway: without a terminal to ask on, add --yes"),
        (["verify", "--kubeconfig", "/a", "--kubeconfig", "/b", "--victim", "gw1"],
         "verify: --victim and --yes go with --failover"),
        (["verify", "--kubeconfig", "/nonexistent/a", "--kubeconfig", "/nonexistent/b"],
         "verify: kubeconfig /nonexistent/a: no such file"),
        (["benchmark", "throughput", "--kubeconfig", "/a"], "benchmark: --kubeconfig: give two or more"),
        (["benchmark", "latency", "--kubeconfig", "/nonexistent/a", "--kubeconfig", "/nonexistent/b"],
         "benchmark: kubeconfig /nonexistent/a: no such file"),
    ],
)  # fmt: skip
def test_kubernetes_mode_refuses_bad_input_in_one_line(magw_cli: MagwCli, argv: list[str], line: str) -> None:
    done = magw_cli(*argv, stdin="")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"magw: error: {line}")
    assert len(done.stderr.strip().splitlines()) == 1


def test_out_of_range_flags_are_refused(magw_cli: MagwCli) -> None:
    done = magw_cli("benchmark", "throughput", "--lab", "x", "--duration", "600", stdin="")
    assert done.returncode == 2 and "600 is not in 1..60" in done.stderr
    done = magw_cli("verify", "--lab", "x", "--victim", "east-gw1", stdin="")
    assert done.returncode == 2 and "--victim and --yes go with --failover" in done.stderr


def test_the_report_names_each_failing_pair_and_its_hop() -> None:
    lab = layout(
        "tunit1",
        parse_topology(
            {
                "clusters": [
                    {"id": "east", "gateways": 2, "workers": 1, "pods_per_node": 1},
                    {"id": "west", "gateways": 2, "workers": 1, "pods_per_node": 1},
                ]
            }
        ),
    )
    client, server = lab.cluster("east").pods[2], lab.cluster("west").pods[2]
    base = {
        "client": client,
        "kind": "pod",
        "target": server.name,
        "cluster": "west",
        "ip": IPv4Address("10.2.3.2"),
        "via": "pod IP",
        "servers": (server,),
    }
    cells = (
        Cell(**base, proto="tcp", ok=True, detail="source seen 10.1.3.2 (kept)"),  # type: ignore[arg-type]
        Cell(
            **base,
            proto="udp",
            ok=False,
            detail="timed out",  # type: ignore[arg-type]
            hop="request died at west-w1 -> west-w1-p1",
        ),
    )
    gws = (
        GatewayRow(gateway="east-gw1", cluster="east", pair="east -> west", flows=8, toward=4, back=3, dead=0),
        GatewayRow(gateway="east-gw2", cluster="east", pair="east -> west", flows=8, toward=0, back=0, dead=0),
    )
    suite = SuiteResult(cells=cells, gateways=gws, flows=8)
    text = report.table(suite, None)
    assert "FAIL east-w1-p1 -> west-w1-p1 (udp): timed out; request died at west-w1 -> west-w1-p1" in text
    assert "FAIL gateway east-gw2 (east -> west): carried none of the 8 flows" in text
    assert text.rstrip().endswith("FAIL: 2/4 checks passed")
    doc = report.report_json("tunit1", suite, None)
    assert doc["ok"] is False
    assert doc["failing"] == [
        "east-w1-p1 -> west-w1-p1 udp: timed out; request died at west-w1 -> west-w1-p1",
        "gateway east-gw2 (east -> west): carried none of the 8 flows (down, unpublished, or out of the nexthop "
        "groups)",
    ]
    assert [g["ok"] for g in doc["gateways"]] == [True, False]


def test_a_failed_check_is_tried_once_more_and_both_tries_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    lab = layout("tunit2", parse_topology({"clusters": [{"id": "east"}, {"id": "west"}]}))
    client, backend = lab.cluster("west").pods[0], lab.cluster("east").pods[0]
    cells = [
        Cell(
            client=client,
            kind="service",
            target=f"east/default/echo-{proto}-{n}",
            cluster="east",
            ip=IPv4Address(f"100.1.0.{n}"),
            via="ClusterIP",
            proto=proto,
            servers=(backend,),
            port=8080,
        )
        for n, proto in ((1, "tcp"), (2, "udp"), (3, "tcp"))
    ]
    # 100.1.0.1 answers; .2 fails once, then answers; .3 never answers
    failures = {"100.1.0.2": 1, "100.1.0.3": 99}
    rounds: list[list[str]] = []

    def fake_probe_many(
        plan: Mapping[str, Sequence[TrafficTarget]], *, timeout: float
    ) -> dict[str, list[ConnectivityResult]]:
        rounds.append([str(t.ip) for ts in plan.values() for t in ts])
        out: dict[str, list[ConnectivityResult]] = {}
        for ns, targets in plan.items():
            for t in targets:
                left = failures.get(str(t.ip), 0)
                failures[str(t.ip)] = left - 1
                err = f"ConnectionResetError: {t.ip}" if left > 0 else None
                out.setdefault(ns, []).append(
                    ConnectivityResult(target=t, ok=err is None, seen_ip="10.2.1.2", server=backend.name, error=err)
                )
        return out

    monkeypatch.setattr(suite, "probe_many", fake_probe_many)
    monkeypatch.setattr(suite, "RETRY_PAUSE", 0.0)
    stub: Any = SimpleNamespace(globalnet=False)
    done = probe_cells(stub, cells, timeout=1.0)
    assert rounds == [["100.1.0.1", "100.1.0.2", "100.1.0.3"], ["100.1.0.2", "100.1.0.3"]]
    assert [c.ok for c in done] == [True, True, False]
    assert done[0].detail == "answered, source seen 10.2.1.2"
    assert done[1].detail == "answered, source seen 10.2.1.2 (first try: ConnectionResetError: 100.1.0.2)"
    assert done[2].detail == "twice: ConnectionResetError: 100.1.0.3"
