"""``magw globalnet show``: objects, per-gateway owners, conditions, pool use and pod egress, as text and JSON,
from a broker directory or a snapshot; usage errors exit 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.support.cli import MagwCli
from tests.support.globalnet_broker import controller, converge, gateway, make_broker, put


def _broker(tmp_path: Path) -> Path:
    d = make_broker(tmp_path / "b")
    gateway(d, "gw1", 6)
    gateway(d, "gw2", 7)
    put(d, "tpl", "ClusterGlobalEgressIP", {"name": "cluster-egress.submariner.io", "numberOfIPs": 2})
    put(d, "e1", "GlobalEgressIP", {"namespace": "ns", "name": "e1"})
    put(d, "e2", "GlobalEgressIP", {"namespace": "ns", "name": "e2", "podSelector": {"matchLabels": {"app": "x"}}})
    put(d, "bad", "GlobalEgressIP", {"namespace": "ns", "name": "bad", "numberOfIPs": 30})
    put(d, "p1", "Pod", {"namespace": "ns", "name": "p1", "ip": "10.1.0.4", "labels": {"app": "x"}})
    put(d, "p2", "Pod", {"namespace": "ns", "name": "p2", "ip": "10.1.0.5"})
    put(d, "h", "Pod", {"namespace": "ns", "name": "h", "ip": "172.18.0.9", "host_network": True})
    converge(controller(d))
    return d


def test_json_report(tmp_path: Path, magw_cli: MagwCli) -> None:
    d = _broker(tmp_path)
    out = magw_cli("globalnet", "show", "--broker-dir", str(d), "--cluster", "east", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    objects = {(o["kind"], o["name"]): o for o in report["objects"]}
    # gw1's 2 + gw2's 2 cluster egress addresses, then e1 and e2 one per gateway each: 8 held of a /24's 254
    assert report["pool"] == {"used": 8, "size": 254}
    e1 = objects[("GlobalEgressIP", "e1")]["status"]
    assert [g["node"] for g in e1["gateways"]] == ["gw1", "gw2"]
    assert all(len(g["allocatedIPs"]) == 1 for g in e1["gateways"])
    bad = objects[("GlobalEgressIP", "bad")]["status"]["conditions"][0]
    assert (bad["status"], bad["reason"]) == ("False", "InvalidInput") and "30" in bad["message"]
    pods = {p["pod"]: (p["level"], p["source"]) for p in report["pods"]}
    assert pods == {
        "ns/p1": (1, "GlobalEgressIP ns/e2"),
        "ns/p2": (3, "GlobalEgressIP ns/e1"),
        "ns/h": (4, "cluster egress IPs"),
    }


def test_text_report_names_owners_and_conditions(tmp_path: Path, magw_cli: MagwCli) -> None:
    d = _broker(tmp_path)
    out = magw_cli("globalnet", "show", "--broker-dir", str(d), "--cluster", "east")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "pool 8/254 addresses held" in text
    assert "ClusterGlobalEgressIP gw1-cluster-egress.submariner.io: 242.1.0.1-242.1.0.2" in text
    assert "    gateway gw2: 242.1.0.3-242.1.0.4" in text
    assert "Allocated=False InvalidInput: numberOfIPs 30 is out of range 0..20" in text
    assert "ns/h: cluster (4), cluster egress IPs" in text


def test_from_a_snapshot_and_usage_errors(tmp_path: Path, magw_cli: MagwCli) -> None:
    snap = tmp_path / "s.yaml"
    snap.write_text(
        yaml.safe_dump(
            {
                "local_cluster": "east",
                "clusters": [
                    {
                        "id": "east",
                        "pod_cidrs": ["10.1.0.0/16"],
                        "service_cidrs": ["100.1.0.0/16"],
                        "global_cidrs": ["242.1.0.0/30"],
                    }
                ],
                "globalnet": {"pods": [{"namespace": "n", "name": "p", "ip": "10.1.0.2"}]},
            }
        )
    )
    out = magw_cli("globalnet", "show", "--snapshot", str(snap))
    assert out.returncode == 0, out.stderr
    assert "pool 0/2 addresses held" in out.stdout and "n/p: cluster (4)" in out.stdout
    bad = magw_cli("globalnet", "show", "--broker-dir", str(tmp_path))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--cluster" in bad.stderr
    both = magw_cli("globalnet", "show", "--snapshot", str(snap), "--broker-dir", str(tmp_path))
    assert both.returncode == 2
    missing = magw_cli("globalnet", "show", "--snapshot", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
