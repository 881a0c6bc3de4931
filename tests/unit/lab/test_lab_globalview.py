"""The lab's reading of the Globalnet controllers' results, without a kernel: the real controller (one pass loop
per cluster, in process) allocates into a broker directory the lab wrote; then ``globalview``, the readiness
check, the inter-cluster probe plan and ``magw lab status`` read it back."""

from __future__ import annotations

from datetime import timedelta
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest

from magw.controllers.globalnet.controller import GlobalnetController
from magw.lab.build.ready import remote_plan
from magw.lab.build.state import LabState
from magw.lab.observe.status import status_doc, status_text
from magw.lab.planes.daemons import write_broker
from magw.lab.planes.readiness import globalnet_missing, read_views
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, layout
from magw.lab.spec.topology import load_topology
from magw.lab.verify.connectivity import TrafficTarget
from magw.sources.file.broker import FileBroker
from magw.sources.file.globalnet_store import GlobalnetStore
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "lab-globalnet.yaml"


def allocate(directory: Path, cluster: str) -> None:
    """Run cluster's controller until it writes nothing more."""
    ctl = GlobalnetController(
        source=FileBroker(directory, local_cluster=cluster),
        store=GlobalnetStore(directory, cluster),
        grace=timedelta(seconds=300),
    )
    for _ in range(6):
        result = ctl.reconcile()
        if not (result.written or result.deleted):
            return
    raise AssertionError(f"{cluster}: the controller did not settle")


@pytest.fixture
def lab_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LabLayout, LabState]:
    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path)
    topo = load_topology(EXAMPLE)
    st = LabState(name="gv", topology=topo, phase="up", daemons=True, token="0" * 16)
    lab = layout("gv", topo)
    write_broker(lab, st.broker_dir)
    return lab, st


def test_nothing_allocated_is_what_up_waits_for(lab_state: tuple[LabLayout, LabState]) -> None:
    lab, st = lab_state
    missing = globalnet_missing(lab, read_views(lab, st))
    assert "east-gw3 cluster egress IPs" in missing
    assert "east service default/echo global IP" in missing
    assert "east headless service shop/web backend global IPs" in missing
    assert "west headless service default/direct backend global IPs" in missing
    # 7 gateways, 3 exported ClusterIP services, 3 exported headless services (east web, west and north direct)
    assert len(missing) == 7 + 3 + 3


def test_views_after_the_controllers_ran(lab_state: tuple[LabLayout, LabState]) -> None:
    lab, st = lab_state
    for c in lab.clusters:
        allocate(st.broker_dir, c.id)
    views = read_views(lab, st)
    assert globalnet_missing(lab, views) == []
    for c in lab.clusters:
        view = views[c.id]
        assert c.global_cidr is not None
        assert sorted(view.gateway_egress) == [g.name for g in c.gateways]
        assert all(len(ips) == 2 and all(ip in c.global_cidr for ip in ips) for ips in view.gateway_egress.values())
        gip = view.service_ip("default", "echo")
        assert gip is not None and gip in c.global_cidr
    east = views["east"]
    web0 = next(p for p in lab.cluster("east").pods if p.short == "web-0")
    assert east.pod_ip("shop", web0.ip) in IPv4Network("242.1.0.0/16")
    assert set(east.backend_ips("shop", "web")) == {web0.ip}
    assert {k: sorted(v) for k, v in east.egress_objects.items()} == {
        ("shop", "db"): ["east-gw1", "east-gw2", "east-gw3"],
        ("shop", "all"): ["east-gw1", "east-gw2", "east-gw3"],
    }
    assert all(len(ips) == 2 for ips in east.egress_objects["shop", "all"].values())


def test_remote_plan_probes_the_exported_services_of_other_clusters_by_global_ip(
    lab_state: tuple[LabLayout, LabState],
) -> None:
    lab, st = lab_state
    for c in lab.clusters:
        allocate(st.broker_dir, c.id)
    views = read_views(lab, st)
    plan = remote_plan(lab, views)
    east_client = lab.cluster("east").pods_of("east-w1")[0].namespace
    gips = {c: views[c].service_ip("default", "echo") for c in ("west", "north")}
    assert sorted(plan[east_client], key=str) == sorted(
        [TrafficTarget(proto=p, ip=ip, port=8080) for ip in gips.values() if ip is not None for p in ("tcp", "udp")],
        key=str,
    )
    assert len(plan) == len(lab.nodes)  # the first pod of every node
    # Without views (no Globalnet): pod IPs, as before.
    assert all(t.ip in IPv4Network("10.0.0.0/16") for t in remote_plan(lab)[east_client])


def test_status_json_shows_the_globalnet_view(lab_state: tuple[LabLayout, LabState]) -> None:
    lab, st = lab_state
    for c in lab.clusters:
        allocate(st.broker_dir, c.id)
    views = read_views(lab, st)
    doc = status_doc(st)
    assert doc["globalnet"] is True
    east = doc["clusters"][0]
    assert east["global_cidr"] == "242.1.0.0/16"
    db = next(p for p in east["pods"] if p["name"] == "east-db-0")
    assert db == {
        "name": "east-db-0",
        "namespace": "shop",
        "netns": "gv-east-w1-p2",
        "ip": "10.0.4.3",
        "node": "east-w1",
        "labels": {"role": "db"},
        "global_ip": None,
    }
    web0 = next(p for p in east["pods"] if p["name"] == "east-web-0")
    assert web0["global_ip"] == str(views["east"].pod_ip("shop", IPv4Address(web0["ip"])))
    echo = next(s for s in east["services"] if s["name"] == "echo")
    assert echo["global_ip"] == str(views["east"].service_ip("default", "echo"))
    web = next(s for s in east["services"] if s["name"] == "web")
    assert (web["ip"], web["headless"], web["global_ips"]) == (None, True, {web0["ip"]: web0["global_ip"]})
    for g in east["gateways"]:
        assert g["cluster_egress_ips"] == [str(ip) for ip in views["east"].gateway_egress[g["name"]]]
    all_ = next(e for e in east["global_egress_ips"] if e["name"] == "all")
    assert sorted(all_["owners"]) == ["east-gw1", "east-gw2", "east-gw3"]
    assert sorted(all_["addresses"]) == sorted(ip for ips in all_["owners"].values() for ip in ips)
    assert len(all_["addresses"]) == 6
    text = status_text(doc)
    assert f"exported: global {echo['global_ip']}" in text
    assert "GlobalEgressIP shop/db: east-gw1 " in text


def test_status_json_of_a_plain_lab_keeps_its_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from magw.lab.spec.topology import default_topology

    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path)
    st = LabState(name="plain", topology=default_topology(), phase="up", daemons=False, token="0" * 16)
    doc = status_doc(st)
    east = doc["clusters"][0]
    assert east["pods"][0] == {"name": "east-gw1-p1", "namespace": "plain-east-gw1-p1", "ip": "10.1.1.2",
                               "node": "east-gw1"}  # fmt: skip
    assert east["services"][0] == {"name": "echo", "ip": "100.1.0.10", "port": 8080,
                                   "backends": ["10.1.1.2", "10.1.2.2", "10.1.3.2", "10.1.4.2"]}  # fmt: skip
    assert "global_cidr" not in east and "cluster_egress_ips" not in east["gateways"][0]
