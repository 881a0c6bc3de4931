"""Kernel tests: ``magw verify`` and ``magw benchmark latency`` on a Globalnet lab, where the clusters' pod and
service CIDRs are identical and a remote pod or Service is reachable only by its global IP (docs/verify.md).

One small lab for the module (east and west with the same CIDRs, 2 gateways and 1 worker each, one pod per node,
an exported ClusterIP service and an exported headless service over every pod, so every pod has a global IP),
always removed. The global IPs are read here from the broker directory with a plain ``FileBroker`` (not through
the code under test)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from ipaddress import IPv4Address
from typing import Any

import pytest

from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from magw.model.globalnet import GLOBAL_INGRESS_IP, ObjectRef
from magw.sources.file.broker import FileBroker
from tests.support.cli import MagwCli
from tests.support.labkit import running_lab

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="magw-route-agent / magw-gateway are not installed (pip -e .)"),
]

SAME = {"pod_cidr": "10.0.0.0/16", "service_cidr": "100.0.0.0/16", "gateways": 2, "workers": 1, "pods_per_node": 1,
        "cluster_egress_ips": 2,
        "services": [{"name": "echo", "selector": {"app": "echo"}, "export": True},
                     {"name": "direct", "selector": {"app": "echo"}, "headless": True, "export": True}]}  # fmt: skip
TOPOLOGY = {"globalnet": True, "clusters": [{"id": "east", **SAME}, {"id": "west", **SAME}]}


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    with running_lab(parse_topology(TOPOLOGY), daemons=True) as built:
        yield built


def global_ips(st: LabState, cluster: str) -> set[IPv4Address]:
    """Every GlobalIngressIP address of ``cluster``, read with a plain FileBroker."""
    broker = FileBroker(st.broker_dir, local_cluster=cluster)
    broker.scan()
    assert broker.snapshot is not None
    gn = broker.snapshot.globalnet
    out = set()
    for obj in gn.ingress_ips:
        status = gn.status_of(ObjectRef(GLOBAL_INGRESS_IP, obj.namespace, obj.name))
        if status is not None:
            out |= set(status.allocated_ips)
    return out


def run_json(magw_cli: MagwCli, *args: str, expect: int) -> dict[str, Any]:
    done = magw_cli(*args, "--json", stdin="", timeout=300)
    assert done.returncode == expect, f"exit {done.returncode}: {done.stderr}\n{done.stdout[-2000:]}"
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_verify_reaches_pods_and_services_by_global_ip(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    layout_, st = lab
    doc = run_json(magw_cli, "verify", "--lab", st.name, "--flows", "16", expect=0)
    by_cluster = {c.id: global_ips(st, c.id) for c in layout_.clusters}
    pods = {p.name: p for p in layout_.pods}
    for c in doc["checks"]:
        client = pods[c["client"]]
        remote = "west" if client.cluster == "east" else "east"
        assert c["ok"] and c["via"] == "global IP", c
        assert IPv4Address(c["address"]) in by_cluster[remote]
        if c["check"] == "pod":
            gcidr = layout_.cluster(client.cluster).global_cidr
            seen = IPv4Address(c["detail"].split()[2])
            assert gcidr is not None and seen in gcidr
    assert doc["gateways"] and all(g["ok"] for g in doc["gateways"])


def test_latency_by_global_ip(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    _layout, st = lab
    doc = run_json(magw_cli, "benchmark", "latency", "--lab", st.name, "--count", "30", "--between", "pods", expect=0)
    west = global_ips(st, "west")
    assert {r["latency"]["proto"] for r in doc["results"]} == {"udp", "tcp"}
    for r in doc["results"]:
        assert r["via"] == "global IP" and IPv4Address(r["target"]) in west
        assert r["latency"]["received"] >= 27 and r["latency"]["p50_us"] > 0
