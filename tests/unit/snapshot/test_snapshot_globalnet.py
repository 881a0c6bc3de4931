"""The snapshot's globalnet section: every kind parses to the model and dumps back; bad fields are one line;
numberOfIPs out of range and an unparsable podSelector are kept for the controller to report; overlaps."""

from __future__ import annotations

import subprocess
import sys
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest
import yaml

from magw.model.globalnet import ObjectRef, PodPhase, TargetType
from magw.model.selector import LabelSelector, Operator, Requirement
from magw.snapshot.load import SnapshotError, dump_snapshot, parse_snapshot, parse_snapshot_text

SECTION: dict[str, Any] = {
    "namespaces": [{"name": "ns1", "labels": {"team": "a"}}],
    "pods": [
        {"namespace": "ns1", "name": "db-0", "ip": "10.1.0.5", "labels": {"role": "db"}, "node": "e-w1"},
        {"namespace": "ns1", "name": "h", "ip": "172.18.0.3", "host_network": True, "phase": "Pending"},
    ],
    "services": [
        {"namespace": "ns1", "name": "api", "cluster_ip": "100.1.0.10", "ports": [{"port": 80, "protocol": "TCP"}]},
        {"namespace": "ns1", "name": "db", "cluster_ip": "None", "selector": {"role": "db"}},
        {"namespace": "ns1", "name": "ext", "cluster_ip": "None", "endpoint_addresses": ["192.168.1.4"]},
    ],
    "service_exports": [{"namespace": "ns1", "name": "api"}],
    "cluster_global_egress_ips": [{"name": "cluster-egress.submariner.io", "numberOfIPs": 4}],
    "global_egress_ips": [
        {"namespace": "ns1", "name": "whole"},
        {
            "namespace": "ns1",
            "name": "dbs",
            "numberOfIPs": 2,
            "podSelector": {
                "matchLabels": {"role": "db"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}],
            },
        },
        {"namespace": "ns1", "name": "huge", "numberOfIPs": 99},
        {"namespace": "ns1", "name": "broken", "podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
    ],
    "global_ingress_ips": [
        {
            "namespace": "ns1",
            "name": "svc-api",
            "target": "ClusterIPService",
            "serviceName": "api",
            "targetRef": {"kind": "Service", "namespace": "ns1", "name": "api"},
            "targetIP": "100.1.0.10",
        }
    ],
    "statuses": [
        {
            "object": {"kind": "GlobalEgressIP", "namespace": "ns1", "name": "whole"},
            "allocatedIPs": ["242.1.0.9", "242.1.0.10"],
            "gateways": [
                {"node": "e-gw1", "allocatedIPs": ["242.1.0.9"]},
                {"node": "e-gw2", "allocatedIPs": ["242.1.0.10"], "goneSince": "2026-11-23T05:00:00Z"},
            ],
            "conditions": [
                {
                    "type": "Allocated",
                    "status": "True",
                    "reason": "Success",
                    "message": "2 addresses",
                    "lastTransitionTime": "2026-11-23T04:00:00Z",
                }
            ],
        }
    ],
}


def _doc(section: dict[str, Any] | None = None, global_cidrs: list[str] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "local_cluster": "east",
        "clusters": [
            {
                "id": "east",
                "pod_cidrs": ["10.1.0.0/16"],
                "service_cidrs": ["100.1.0.0/16"],
                "global_cidrs": global_cidrs or ["242.1.0.0/16"],
            },
            {
                "id": "west",
                "pod_cidrs": ["10.1.0.0/16"],
                "service_cidrs": ["100.1.0.0/16"],
                "global_cidrs": ["242.2.0.0/16"],
            },
        ],
    }
    if section is not None:
        doc["globalnet"] = section
    return doc


def test_every_kind_parses() -> None:
    gn = parse_snapshot(_doc(SECTION)).globalnet
    assert gn.namespaces[0].labels == (("team", "a"),)
    db0 = next(p for p in gn.pods if p.name == "db-0")
    assert db0.ip == IPv4Address("10.1.0.5") and db0.phase is PodPhase.RUNNING and db0.node == "e-w1"
    h = next(p for p in gn.pods if p.name == "h")
    assert h.host_network and h.phase is PodPhase.PENDING
    svc = {s.name: s for s in gn.services}
    assert not svc["api"].headless and svc["api"].ports[0].port == 80
    assert svc["db"].headless and svc["db"].selector == (("role", "db"),)
    assert svc["ext"].selector is None and svc["ext"].endpoint_addresses == (IPv4Address("192.168.1.4"),)
    egress = {e.name: e for e in gn.egress_ips}
    assert egress["whole"].pod_selector is None and egress["whole"].number_of_ips == 1, "defaults: namespace, 1"
    assert egress["dbs"].pod_selector == LabelSelector(
        match_labels={"role": "db"}, match_expressions=(Requirement("tier", Operator.NOT_IN, ("x",)),)
    )
    assert egress["huge"].number_of_ips == 99, "out of range is kept for the controller's status"
    assert "needs at least one value" in egress["broken"].pod_selector_error
    assert gn.cluster_egress_ips[0].number_of_ips == 4
    assert gn.ingress_ips[0].target is TargetType.CLUSTER_IP_SERVICE
    status = gn.status_of(ObjectRef("GlobalEgressIP", "ns1", "whole"))
    assert status is not None and [g.gone_since for g in status.gateways] == ["", "2026-11-23T05:00:00Z"]


def test_dump_reads_back_equal() -> None:
    """Everything reads back equal, except a podSelector that did not parse (its raw text is not kept)."""
    section = dict(SECTION, global_egress_ips=[e for e in SECTION["global_egress_ips"] if e["name"] != "broken"])
    snap = parse_snapshot(_doc(section))
    assert parse_snapshot_text(dump_snapshot(snap)).globalnet == snap.globalnet


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "pods",
            [{"namespace": "n", "name": "p", "ip": "10.1.0.300"}],
            "globalnet.pods[0].ip: '10.1.0.300' is not an IPv4 address",
        ),
        (
            "pods",
            [{"namespace": "n", "name": "p", "phase": "Sleeping"}],
            "globalnet.pods[0].phase: 'Sleeping' is not a pod phase",
        ),
        (
            "global_egress_ips",
            [{"namespace": "n", "name": "e", "numberOfIPs": "two"}],
            "globalnet.global_egress_ips[0].numberOfIPs: expected an integer",
        ),
        (
            "global_egress_ips",
            [{"namespace": "n", "name": "e"}, {"namespace": "n", "name": "e"}],
            "globalnet.global_egress_ips[1]: n/e is listed twice",
        ),
        (
            "services",
            [{"namespace": "n", "name": "s", "cluster_ip": "100.1.0.1", "endpoint_addresses": ["1.2.3.4"]}],
            "only a headless service without a selector",
        ),
        ("namespaces", [{"name": "n", "colour": "red"}], "globalnet.namespaces[0].colour: unknown key"),
    ],
)
def test_bad_fields_are_one_line(path: str, value: Any, message: str) -> None:
    with pytest.raises(SnapshotError) as err:
        parse_snapshot(_doc({path: value}))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_globalnet_clusters_may_overlap_but_global_cidrs_may_not() -> None:
    parse_snapshot(_doc())  # east and west share pod and service CIDRs: fine with Globalnet
    with pytest.raises(SnapshotError, match=r"242.2.0.0/16 overlaps 242.2.0.0/24 of cluster 'east'"):
        parse_snapshot(_doc(global_cidrs=["242.2.0.0/24"]))
    with pytest.raises(SnapshotError, match=r"10.1.0.0/16 overlaps global CIDR 10.1.0.0/24 of cluster 'east'"):
        parse_snapshot(_doc(global_cidrs=["10.1.0.0/24"]))


def test_endpoint_allocated_ips() -> None:
    doc = _doc()
    doc["endpoints"] = [
        {
            "cluster": "west",
            "hostname": "w-gw1",
            "private_ip": "172.19.0.4",
            "allocated_ips": ["242.2.0.2", "242.2.0.1"],
        }
    ]
    snap = parse_snapshot(doc)
    assert snap.endpoints[0].allocated_ips == (IPv4Address("242.2.0.1"), IPv4Address("242.2.0.2"))
    assert parse_snapshot_text(dump_snapshot(snap)) == snap


def test_magw_plan_accepts_a_globalnet_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "gn.yaml"
    doc = _doc(SECTION)
    doc["clusters"][1]["pod_cidrs"] = ["10.2.0.0/16"]  # the routing planner still needs disjoint clusters
    doc["clusters"][1]["service_cidrs"] = ["100.2.0.0/16"]
    doc["nodes"] = [{"name": "e-gw1", "ip": "172.18.0.6", "cni_ip": "10.1.1.1", "gateway": True}]
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run(
        [sys.executable, "-m", "magw.cli.main", "plan", "--snapshot", str(path), "--node", "e-gw1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
