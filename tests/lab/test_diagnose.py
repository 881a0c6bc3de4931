"""Kernel test: ``magw diagnose --lab`` on one running lab (east and west, two gateways and one worker each,
multi-active, the plain VXLAN cable), with a unique name, always removed.

A healthy lab passes every check on every node, each topic present on each node, and the firewall paths
cover each remote gateway through ``vxlan-tunnel`` and each local gateway through ``vx-submariner``. A
namespace with the lab's prefix that no node owns is reported stale (warn, with the ``ip netns del`` fix).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from magw.lab.planes.daemons import daemons_installed
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from magw.model.vtep import vtep_ip
from magw.ops.diagnose.node import TOPICS
from tests.support.cli import MagwCli
from tests.support.labkit import running_lab

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

SPEC = {"gateways": 2, "workers": 1, "pods_per_node": 1}
TOPOLOGY = {"clusters": [{"id": "east", **SPEC}, {"id": "west", **SPEC}]}
TIMEOUT = 600  # a safety bound for a loaded machine, not a speed assertion


@pytest.fixture(scope="module")
def lab() -> Iterator[LabLayout]:
    with running_lab(parse_topology(TOPOLOGY, source="test_diagnose"), daemons=True) as (layout, _):
        yield layout


def _report(magw_cli: MagwCli, *args: str) -> tuple[int, dict[str, Any]]:
    out = magw_cli("diagnose", "all", *args, "--json", timeout=TIMEOUT)
    assert out.stderr == "" or out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)


def test_a_healthy_lab_passes_every_check(lab: LabLayout, magw_cli: MagwCli) -> None:
    code, doc = _report(magw_cli, "--lab", lab.name)
    bad = [(n["node"], c["topic"], c["name"], c["detail"]) for n in doc["nodes"] for c in n["checks"]
           if c["verdict"] != "pass"]
    assert bad == []
    assert (code, doc["verdict"], doc["counts"]["fail"]) == (0, "pass", 0)
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert set(nodes) == {n.name for n in lab.nodes} | {f"lab {lab.name}"}
    for node in lab.nodes:
        assert {c["topic"] for c in nodes[node.name]["checks"]} == set(TOPICS)
        paths = {c["name"] for c in nodes[node.name]["checks"] if c["topic"] == "firewall"}
        cluster = lab.cluster(node.cluster)
        local = {f"vx-submariner -> {vtep_ip(g.node_ip, inter_cluster=False)} via {g.node_ip}"
                 for g in cluster.gateways if g.name != node.name}
        assert local <= paths, paths
        routes = {c["name"] for c in nodes[node.name]["checks"] if c["topic"] == "shadow"}
        remote_cidrs = {f"route {c.pod_cidr}" for c in lab.clusters if c.id != node.cluster}
        assert remote_cidrs <= routes, routes  # every remote CIDR's route was resolved, multipath ones too
        if node.gateway:
            remote = {f"vxlan-tunnel -> {vtep_ip(g.node_ip, inter_cluster=True)} via {g.public_ip}"
                      for c in lab.clusters if c.id != node.cluster for g in c.gateways if g.public_ip}
            assert remote <= paths, paths


def test_one_node_and_a_stray_namespace(lab: LabLayout, magw_cli: MagwCli) -> None:
    gw = lab.clusters[0].gateways[0].name
    code, doc = _report(magw_cli, "--lab", lab.name, "--node", gw)
    assert code == 0 and [n["node"] for n in doc["nodes"]] == [gw]
    stray = f"{lab.name}-stray"
    # another lab named "<ours>-b" shares our namespace prefix; its namespaces are not stray ones of ours
    other = naming.STATE_ROOT / f"{lab.name}-b"
    others_ns = f"{other.name}-n1"
    other.mkdir()
    try:
        for ns in (stray, others_ns):
            subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
        out = magw_cli("diagnose", "stale", "--lab", lab.name, timeout=TIMEOUT)
    finally:
        for ns in (stray, others_ns):
            subprocess.run(["ip", "netns", "del", ns], check=False, timeout=30)
        other.rmdir()
    assert out.returncode == 0  # a warning does not fail the run
    assert f"WARN stale    namespace {stray}: a namespace of this lab that no node of its plan owns" in out.stdout
    assert f"     fix: ip netns del {stray}" in out.stdout
    assert others_ns not in out.stdout
