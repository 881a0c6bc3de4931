"""Kernel tests: ``magw verify`` and ``magw benchmark`` on a running lab (docs/verify.md, docs/benchmark.md).

One small lab for the module (east and west, 2 gateways and 1 worker each, one pod per node, real daemons), always
removed. Everything is run through the CLI as an operator runs it, and read from its ``--json``. Hops are broken on
purpose with an nft table of the test's own in one lab node (removed in ``finally``) and the report must name the
pair and the hop. ``--failover`` runs last: it fails a gateway and recovers it. No assertion is about time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from magw.lab.build import netns
from magw.lab.build.state import LabState
from magw.lab.observe.healthview import health_doc
from magw.lab.planes.daemons import daemons_installed
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from tests.support.cli import MagwCli
from tests.support.labkit import poll, running_lab
from tests.support.paths import REPO

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="magw-route-agent / magw-gateway are not installed (pip -e .)"),
]

# The Service listens on port 80 (kube-proxy's DNAT to the pods' 8080): verify must probe a Service's own port.
WEB = {"name": "web", "port": 80}
TOPOLOGY = {
    "clusters": [
        {"id": c, "gateways": 2, "workers": 1, "pods_per_node": 1, "services": [WEB]} for c in ("east", "west")
    ]
}
DROP = "tverifydrop"


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    with running_lab(parse_topology(TOPOLOGY), daemons=True) as built:
        yield built


def run_json(magw_cli: MagwCli, *args: str, expect: int) -> dict[str, Any]:
    done = magw_cli(*args, "--json", stdin="", timeout=300)
    assert done.returncode == expect, f"exit {done.returncode}: {done.stderr}\n{done.stdout[-2000:]}"
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def drop_forward(ns: str, rule: str) -> None:
    netns.nft_load(ns, f"table ip {DROP} {{\n chain drops {{\n  type filter hook forward priority 0; policy accept;\n"
                       f"  {rule} drop\n }}\n}}\n")  # fmt: skip


def undrop(ns: str) -> None:
    netns.ns_exec(ns, "nft", "delete", "table", "ip", DROP)


def test_verify_passes_on_a_healthy_lab(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    layout_, st = lab
    doc = run_json(magw_cli, "verify", "--lab", st.name, expect=0)
    assert doc["ok"] is True and doc["failing"] == []
    checks = doc["checks"]
    # every node's first pod to a pod and a service of the other cluster, over TCP and UDP
    assert {c["client"] for c in checks} == {layout_.cluster(c).pods_of(n.name)[0].name
                                            for c in ("east", "west") for n in layout_.cluster(c).nodes}  # fmt: skip
    assert {(c["check"], c["proto"]) for c in checks} == {("pod", "tcp"), ("pod", "udp"), ("service", "tcp"),
                                                          ("service", "udp")}  # fmt: skip
    assert all(c["ok"] and c["hop"] is None for c in checks)
    assert {c["target"] for c in checks if c["check"] == "service"} == {"east/default/web", "west/default/web"}
    for c in checks:
        if c["check"] == "pod":
            client_ip = next(str(p.ip) for p in layout_.pods if p.name == c["client"])
            assert c["detail"] == f"source seen {client_ip} (kept)"
    # every gateway of both clusters carried some of the traced flows of both pairs, and none died
    rows = {(g["gateway"], g["pair"]): g for g in doc["gateways"]}
    assert set(rows) == {(g.name, p) for g in layout_.gateways for p in ("east -> west", "west -> east")}
    for g in rows.values():
        assert g["ok"] and g["dead"] == 0 and g["toward"] + g["back"] > 0, g


def test_a_drop_before_a_pod_names_the_pair_and_the_hop(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    layout_, st = lab
    target = layout_.cluster("west").pods[0]  # the first client's pod target (verify rotates with the client)
    node = layout_.node(target.node)
    client = layout_.cluster("east").pods_of("east-w1")[0]
    drop_forward(node.namespace, f"ip daddr {target.ip}")
    try:
        doc = run_json(magw_cli, "verify", "--lab", st.name, "--client", client.name, "--flows", "8", expect=1)
    finally:
        undrop(node.namespace)
    bad = [c for c in doc["checks"] if c["check"] == "pod"]
    assert {c["target"] for c in bad} == {target.name}
    for c in bad:
        assert not c["ok"]
        assert c["hop"] == f"request died at {node.name} -> {target.name}"
        assert c["detail"].startswith("twice: ")  # tried a second time before it failed
        why = f"{c['detail']}; request died at {node.name} -> {target.name}"
        assert f"{client.name} -> {target.name} {c['proto']}: {why}" in doc["failing"]


def test_a_drop_on_one_gateway_is_named_with_its_hop(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    layout_, st = lab
    gw = layout_.node("east-gw1")
    west = layout_.cluster("west")
    drop_forward(gw.namespace, f"ip daddr {west.pod_cidr}")
    try:
        doc = run_json(magw_cli, "verify", "--lab", st.name, "--client", "east-w1-p1", "--flows", "32", expect=1)
    finally:
        undrop(gw.namespace)
    mine = [g for g in doc["gateways"] if g["gateway"] == "east-gw1"]
    assert mine and all(not g["ok"] and g["dead"] > 0 for g in mine), mine
    hops = [h for g in mine for h in g["hops"]]
    assert any(h.startswith("request died at east-gw1 -> a west gateway") for h in hops), hops
    assert any(h.startswith("reply died at east-gw1 -> a west gateway") for h in hops), hops
    # every other gateway passes: the flows it carried that died are counted where they died
    others = [g for g in doc["gateways"] if g["gateway"] != "east-gw1"]
    assert others and all(g["ok"] and g["toward"] + g["back"] > 0 for g in others), others
    assert any(g["elsewhere"] > 0 for g in others)


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (scripts/setup.sh installs it)")
def test_benchmark_throughput(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    layout_, st = lab
    doc = run_json(magw_cli, "benchmark", "throughput", "--lab", st.name, "--duration", "2", expect=0)
    rows = {r["between"]: r for r in doc["results"]}
    assert set(rows) == {"gateways", "pods"}
    assert rows["gateways"]["client_node"] == "east-gw1" and rows["gateways"]["server_node"].startswith("west-gw")
    assert rows["pods"]["client_node"] == "east-w1" and rows["pods"]["server_node"] == "west-w1"
    for r in rows.values():
        assert r["ok"] and r["via"] == "pod IP"
        assert r["target"] == next(str(p.ip) for p in layout_.pods if p.name == r["server"])
        t = r["throughput"]
        assert t["received_bytes"] > 0 and t["received_bps"] > 0 and t["streams"] == 1


def test_benchmark_latency(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    _layout, st = lab
    doc = run_json(magw_cli, "benchmark", "latency", "--lab", st.name, "--count", "50", expect=0)
    got = {(r["between"], r["latency"]["proto"]) for r in doc["results"]}
    assert got == {("gateways", "udp"), ("gateways", "tcp"), ("pods", "udp"), ("pods", "tcp")}
    for r in doc["results"]:
        lat = r["latency"]
        assert lat["sent"] == 50 and lat["received"] >= 45
        assert 0 < lat["min_us"] <= lat["p50_us"] <= lat["p90_us"] <= lat["p99_us"] <= lat["max_us"]


_PROBERS = {("east", "east-gw1"), ("east", "east-gw2"), ("west", "west-w1")}


def _down_by(lab_layout: LabLayout, st: LabState, gateway: str) -> set[tuple[str, str]]:
    """(cluster, node) of every node whose route agent's status calls ``gateway`` down."""
    clusters = health_doc(lab_layout, st)["clusters"]
    return {(c, node) for c, view in clusters.items() for node in view.get(gateway, {}).get("down_by", [])}


def test_a_failed_gateway_carried_none(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    layout_, st = lab
    magw_cli.lab("fail", "west-gw2", "--name", st.name)
    try:
        # verify reports what the datapath does now: start once the nodes that probe west-gw2 (east's gateways,
        # west's worker) have called it down, as a loaded machine can take seconds to (docs/health.md)
        poll("west-gw2 called down by its probers", lambda: _down_by(layout_, st, "west-gw2") >= _PROBERS)
        doc = run_json(magw_cli, "verify", "--lab", st.name, "--client", "east-w1-p1", "--flows", "16", expect=1)
    finally:
        magw_cli.lab("recover", "west-gw2", "--name", st.name)
    rows = {(g["gateway"], g["pair"]): g for g in doc["gateways"]}
    for pair in ("east -> west", "west -> east"):
        dead = rows[("west-gw2", pair)]
        assert not dead["ok"] and dead["toward"] == dead["back"] == 0
        assert all(g["ok"] for (name, p), g in rows.items() if p == pair and name != "west-gw2")
    # the other gateways carry everything: every check passes but a Service's that kube-proxy sent to its backend on
    # the dead node (the lab keeps it in the Service, as Kubernetes does until the node's grace period is over).
    # verify's trace then names that backend, or, when its own new flows all went to live backends (each picks one
    # of three: (2/3)^4 of the time for 4 flows), says the failure depends on the flow.
    dead_pod = layout_.cluster("west").pods_of("west-gw2")[0].name
    for c in doc["checks"]:
        hop = c["hop"] or ""
        backends = hop.rsplit(" -> ", 1)[-1].split("|")
        by_flow = hop.startswith("none found:") and "the failure depends on the flow" in hop
        assert c["ok"] or (c["check"] == "service" and (dead_pod in backends or by_flow)), doc["failing"]
    # back to healthy before the next test (bounded): every gateway carries flows again
    poll("every gateway carries flows again after the recovery",
         lambda: magw_cli("verify", "--lab", st.name, "--client", "east-w1-p1", "--flows", "8", stdin="",
                          timeout=120).returncode == 0, limit=90.0)  # fmt: skip


def test_failover_asks_first_on_a_terminal(lab: tuple[LabLayout, LabState]) -> None:
    """On a terminal ``--failover`` asks; anything but yes refuses (exit 2) before any probe or failure."""
    _layout, st = lab
    primary, secondary = os.openpty()
    try:
        os.write(primary, b"n\n")
        done = subprocess.run([*MagwCli().argv, "verify", "--lab", st.name, "--failover"], stdin=secondary,
                              capture_output=True, text=True, timeout=120, cwd=REPO)  # fmt: skip
    finally:
        os.close(primary)
        os.close(secondary)
    assert done.returncode == 2, done.stderr
    assert f"gateway east-gw1 of lab {st.name} loses its links and daemons" in done.stderr
    assert done.stderr.strip().endswith("magw: error: verify: --failover: not confirmed")
    assert done.stdout == ""  # not even the suite ran (it comes before the failover)


def test_failover_measures_what_moved(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    _layout, st = lab
    doc = run_json(magw_cli, "verify", "--lab", st.name, "--client", "east-w1-p1", "--flows", "0", "--failover",
                   "--yes", "--victim", "east-gw1", expect=0)  # fmt: skip
    fo = doc["failover"]
    assert fo["ok"] and fo["victim"] == "east-gw1"
    s = fo["summary"]
    assert s["flows"] == 32 and s["crossed_victim"] > 0
    crossed = [f for f in fo["flows"] if f["crossed_victim"]]
    assert crossed and all("east-gw1" not in f["after"]["toward"] + f["after"]["back"] for f in crossed)
    assert all(f["moved"] for f in crossed if "east-gw1" in f["before"]["toward"])
    assert all(f["lost_tail"] == 0 for f in fo["flows"])
    assert fo["detection_seconds"] and all(d["peer"] == "east-gw1" and d["seconds"] > 0
                                           for d in fo["detection_seconds"])  # fmt: skip
