"""Kernel test: ``up`` of a Globalnet lab (docs/lab.md) starts one ``magw-globalnet`` per cluster, which
allocate every gateway's cluster egress IPs and the exported services' global IPs; ``status --json`` shows them.

Three clusters with IDENTICAL pod and service CIDRs, kept small (a shared VM runs these). Inter-cluster traffic
is not asserted here (the Globalnet datapath has its own tests, tests/lab/test_lab_globalnet.py), so the main lab's
``up`` skips only its last wait, the inter-cluster probes; the last test runs the full ``up`` once. What the
controllers wrote is read with a plain ``FileBroker``, not through the lab's ``globalview``. Every lab has a
unique name and is removed afterwards, also on failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network

import pytest

from magw.lab.build import lifecycle as build
from magw.lab.build import procs
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.spec.layout import LabLayout, layout
from magw.lab.spec.topology import Topology, parse_topology
from magw.model.globalnet import GlobalIPStatus, ObjectRef
from magw.sources.file.broker import FileBroker
from tests.support.cli import MagwCli
from tests.support.labkit import NOTHING_LEFT, leftovers, unique_name

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

SAME = {"pod_cidr": "10.0.0.0/16", "service_cidr": "100.0.0.0/16", "pods_per_node": 1, "cluster_egress_ips": 2}
ECHO = {"name": "echo", "selector": {"app": "echo"}, "export": True}


def topology() -> Topology:
    east = {
        "id": "east",
        **SAME,
        "gateways": 2,
        "workers": 1,
        "pods": [{"name": "web-0", "namespace": "shop", "node": "w1", "labels": {"app": "web"}}],
        "services": [
            ECHO,
            {"name": "web", "namespace": "shop", "selector": {"app": "web"}, "headless": True, "export": True},
        ],
        "global_egress_ips": [{"name": "all", "namespace": "shop", "number_of_ips": 1}],
    }
    others = [{"id": cid, **SAME, "gateways": 1, "workers": 0, "services": [ECHO]} for cid in ("west", "north")]
    return parse_topology({"globalnet": True, "clusters": [east, *others]})


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    name = unique_name()
    topo = topology()
    try:
        st = build.up(topo, name=name, daemons=True, wait_timeout=90.0, remote_wait=False)
        yield layout(name, topo), st
    finally:
        build.down(name)


def statuses(st: LabState, cluster: str) -> dict[ObjectRef, GlobalIPStatus]:
    broker = FileBroker(st.broker_dir, local_cluster=cluster)
    broker.scan()
    assert broker.snapshot is not None
    return dict(broker.snapshot.globalnet.statuses)


def test_one_controller_per_cluster_runs_in_its_underlay_namespace(lab: tuple[LabLayout, LabState]) -> None:
    layout_, st = lab
    controllers = sorted((p.owner, p.namespace) for p in st.processes if p.kind == "globalnet")
    assert controllers == sorted((c.id, c.underlay_ns) for c in layout_.clusters)
    assert all(procs.alive(p) for p in st.processes if p.kind == "globalnet")


def test_controllers_allocated_every_gateway_and_exported_service(lab: tuple[LabLayout, LabState]) -> None:
    layout_, st = lab
    for c in layout_.clusters:
        assert c.global_cidr is not None
        found = statuses(st, c.id)
        for g in c.gateways:
            egress = found[ObjectRef("ClusterGlobalEgressIP", "", f"{g.name}-cluster-egress.submariner.io")]
            assert len(egress.allocated_ips) == 2 and all(ip in c.global_cidr for ip in egress.allocated_ips)
            assert [b.node for b in egress.gateways] == [g.name]
        echo = found[ObjectRef("GlobalIngressIP", "default", "svc-echo")]
        assert len(echo.allocated_ips) == 1 and echo.allocated_ips[0] in c.global_cidr
    east = statuses(st, "east")
    assert len(east[ObjectRef("GlobalIngressIP", "shop", "pod-web-0")].allocated_ips) == 1
    assert [b.node for b in east[ObjectRef("GlobalEgressIP", "shop", "all")].gateways] == ["east-gw1", "east-gw2"]


def test_status_json_shows_the_allocations(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    layout_, st = lab
    out = magw_cli("lab", "status", "--name", st.name, "--json", timeout=60, check=True)
    doc = json.loads(out.stdout)
    assert doc["globalnet"] is True
    for c in doc["clusters"]:
        found = statuses(st, c["id"])
        for g in c["gateways"]:
            ref = ObjectRef("ClusterGlobalEgressIP", "", f"{g['name']}-cluster-egress.submariner.io")
            assert g["cluster_egress_ips"] == [str(ip) for ip in found[ref].allocated_ips]
        echo = next(s for s in c["services"] if s["name"] == "echo")
        assert echo["global_ip"] == str(found[ObjectRef("GlobalIngressIP", "default", "svc-echo")].allocated_ips[0])
        assert IPv4Address(echo["global_ip"]) in IPv4Network(c["global_cidr"])
    east = doc["clusters"][0]
    web0 = next(p for p in east["pods"] if p["name"] == "east-web-0")
    assert (web0["namespace"], web0["labels"], web0["netns"]) == ("shop", {"app": "web"}, f"{st.name}-east-w1-p2")
    assert web0["global_ip"] is not None
    (all_,) = east["global_egress_ips"]
    assert sorted(all_["owners"]) == ["east-gw1", "east-gw2"] and len(all_["addresses"]) == 2
    assert layout_.cluster("east").pods_of("east-w1")[1].namespace == web0["netns"]


def test_full_up_then_down_removes_everything_including_the_controllers() -> None:
    """A second small lab, with ``up``'s every wait: its last one probes each cluster's exported service from the
    other cluster by global IP (ready.remote_plan with Globalnet). After ``down`` no namespace, process
    (controllers included) or state file is left."""
    name = unique_name()
    topo = parse_topology({"globalnet": True, "clusters": [
        {"id": "a", **SAME, "gateways": 1, "workers": 0, "services": [ECHO]},
        {"id": "b", **SAME, "gateways": 1, "workers": 0, "services": [ECHO]},
    ]})  # fmt: skip
    st = None
    try:
        st = build.up(topo, name=name, daemons=True, wait_timeout=90.0)
        assert sum(1 for p in st.processes if p.kind == "globalnet") == 2
    finally:
        build.down(name)
    assert st is not None
    assert leftovers(name, st.processes) == NOTHING_LEFT
