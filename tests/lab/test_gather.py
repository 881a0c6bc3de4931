"""Kernel test: ``magw gather --lab`` on one running lab with the WireGuard cable and the Kubernetes control plane.

One lab for the module (east and west, one gateway and one worker each, wireguard-go between the gateways, an API
server emulator per cluster and one for the broker), with a unique name, always removed. What it proves:

- the tarball holds, per node, the kernel's objects as the tools print them (checked against the namespaces
  themselves: every link and every nft table there is in the gathered text), ``wg show`` on the gateways (with the
  public key the gateway's Endpoint publishes, the private key hidden), every daemon's log and status file, each
  cluster's and the broker's objects, the versions and ``magw diagnose``'s report; the MANIFEST lists exactly the
  members, each with the command or file it came from, and nothing failed;
- no member holds a gateway's private key, in base64, in hex or raw, nor any credential of the lab's kubeconfigs.
"""

from __future__ import annotations

import base64
import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from magw.drivers.wireguard.keys import KEY_DIR, KEY_FILE
from magw.lab.build.state import LabState
from magw.lab.planes import kube
from magw.lab.planes.daemons import daemons_installed, node_state_dir
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from tests.support.cli import MagwCli
from tests.support.labkit import running_lab

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

SPEC = {"gateways": 1, "workers": 1, "pods_per_node": 1}
TOPOLOGY = {"cable": "wireguard", "clusters": [{"id": "east", **SPEC}, {"id": "west", **SPEC}]}
NODE_READS = ("ip-link.txt", "ip-addr.txt", "ip-route.txt", "ip-rule.txt", "ip-nexthop.json",
              "ip-nexthop-bucket.txt", "ip-neigh.txt", "bridge-fdb.txt", "nft-ruleset.txt", "sysctl.txt",
              "conntrack-stats.txt")  # fmt: skip


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    topo = parse_topology(TOPOLOGY, source="test_gather")
    with running_lab(topo, daemons=True, control_plane="kube", wait_timeout=180.0) as lab:
        yield lab


@pytest.fixture(scope="module")
def gathered(lab: tuple[LabLayout, LabState], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``magw gather --lab NAME -o FILE`` run once as a user runs it: its process, and the tarball's members."""
    _lab, st = lab
    out = tmp_path_factory.mktemp("gather") / "report.tar.gz"
    done = MagwCli()("gather", "--lab", st.name, "-o", str(out), timeout=600)
    assert done.returncode == 0, done.stderr
    with tarfile.open(out, "r:gz") as tar:
        names = tar.getnames()
        members = {}
        for info in tar.getmembers():
            f = tar.extractfile(info)
            assert f is not None
            members[info.name] = f.read()
    return {"done": done, "names": names, "members": members, "out": out}


def member(gathered: dict[str, Any], path: str) -> bytes:
    data: bytes = gathered["members"][f"report/{path}"]
    return data


def manifest(gathered: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(member(gathered, "MANIFEST.json"))
    return doc


def test_manifest_lists_exactly_the_members_and_nothing_failed(gathered: dict[str, Any]) -> None:
    """Every member is under ``report/``, is in the MANIFEST with a source, and the MANIFEST names no other; the
    command's one line says where it wrote and how many files."""
    doc = manifest(gathered)
    listed = {f"report/{f['path']}" for f in doc["files"]} | {"report/MANIFEST.json"}
    assert set(gathered["names"]) == listed
    assert len(gathered["names"]) == len(listed)  # no member twice
    assert all(f["source"] for f in doc["files"])
    assert doc["failed"] == []
    assert doc["mode"] == "lab"
    assert gathered["done"].stdout.startswith(f"wrote {gathered['out']}: {len(listed)} files (lab ")


def _ns_text(ns: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, check=True,
                          timeout=30).stdout  # fmt: skip


def test_each_node_kernel_objects_are_there(lab: tuple[LabLayout, LabState], gathered: dict[str, Any]) -> None:
    """Per node, every read-back, made by the command the MANIFEST names; each link of the namespace (listed here
    with ``ip -j``) and each nft table in it (``nft -j list tables``) appears in the gathered text."""
    lab_layout, _st = lab
    sources = {f["path"]: f["source"] for f in manifest(gathered)["files"]}
    for node in lab_layout.nodes:
        for read in NODE_READS:
            assert f"nodes/{node.name}/{read}" in sources
        assert sources[f"nodes/{node.name}/nft-ruleset.txt"] == f"ip netns exec {node.namespace} nft list ruleset"
        links = json.loads(_ns_text(node.namespace, "ip", "-j", "link", "show"))
        text = member(gathered, f"nodes/{node.name}/ip-link.txt").decode()
        for link in links:
            assert f" {link['ifname']}" in text, f"{node.name}: {link['ifname']} missing"
        tables = json.loads(_ns_text(node.namespace, "nft", "-j", "list", "tables"))["nftables"]
        ruleset = member(gathered, f"nodes/{node.name}/nft-ruleset.txt").decode()
        names = [t["table"]["name"] for t in tables if "table" in t]
        assert names, f"{node.name}: no nft table to compare"
        for name in names:
            assert f"table ip {name} {{" in ruleset or f"table inet {name} {{" in ruleset
        nexthops = json.loads(member(gathered, f"nodes/{node.name}/ip-nexthop.json"))
        assert isinstance(nexthops, list)
        assert any("group" in nh for nh in nexthops), f"{node.name}: no nexthop group gathered"


def test_wg_show_on_gateways_with_the_published_key(lab: tuple[LabLayout, LabState],
                                                     gathered: dict[str, Any]) -> None:  # fmt: skip
    """Each gateway's ``wg show`` names its device with the public key its Endpoint publishes (read here from the
    broker's emulator) and says ``private key: (hidden)``; workers have none."""
    lab_layout, st = lab
    published = {}
    for obj in kube.broker_api(st).http().list("Endpoint"):
        spec = obj.get("spec") or {}
        published[spec.get("hostname")] = (spec.get("backend_config") or {}).get("publicKey")
    for node in lab_layout.nodes:
        path = f"report/nodes/{node.name}/wg-show.txt"
        if not node.gateway:
            assert path not in gathered["members"]
            continue
        text = gathered["members"][path].decode()
        assert f"public key: {published[node.name]}" in text
        assert "private key: (hidden)" in text


def test_statuses_logs_objects_versions_and_diagnose(lab: tuple[LabLayout, LabState],
                                                     gathered: dict[str, Any]) -> None:  # fmt: skip
    """Every route agent's and gateway's log and status file, the lab's status and show documents, each API
    server's Endpoints, the versions (iproute2's as ``ip -V`` prints it) and a diagnose report with the build
    that ran it."""
    lab_layout, st = lab
    names = set(gathered["names"])
    for node in lab_layout.nodes:
        assert f"report/lab/logs/route-agent-{node.name}.log" in names
        status = json.loads(member(gathered, f"lab/status/route-agent-{node.name}.json"))
        assert isinstance(status, dict)
        if node.gateway:
            assert f"report/lab/logs/gateway-{node.name}.log" in names
    lab_status = json.loads(member(gathered, "lab/lab-status.json"))
    assert lab_status["name"] == st.name
    assert "gateways" in json.loads(member(gathered, "lab/show-all.json"))
    for api in kube.api_servers(st):
        endpoints = json.loads(member(gathered, f"kube/{api.name}/Endpoint.json"))
        assert sorted(e["spec"]["hostname"] for e in endpoints) == sorted(g.name for g in lab_layout.gateways)
    versions = json.loads(member(gathered, "versions.json"))
    ip_v = subprocess.run(["ip", "-V"], capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    assert versions["iproute2"]["version"] == ip_v
    diagnose = [n for n in names if n.startswith("report/diagnose/") and n.endswith(".json")]
    assert diagnose
    assert b"magw " in member(gathered, "diagnose/BUILD.txt")


def _key_forms(key: str) -> dict[str, bytes]:
    raw = base64.b64decode(key, validate=True)
    return {"base64": key.encode(), "hex": raw.hex().encode(), "HEX": raw.hex().upper().encode(), "raw": raw}


def test_no_private_key_and_no_credential_in_any_member(lab: tuple[LabLayout, LabState],
                                                        gathered: dict[str, Any]) -> None:  # fmt: skip
    """Each gateway's private key (read here from its 0600 file), in base64, hex or raw bytes, is in no member;
    nor is any credential value of the lab's kubeconfigs."""
    lab_layout, st = lab
    secrets: dict[str, bytes] = {}
    for gw in lab_layout.gateways:
        key = (node_state_dir(st, gw) / KEY_DIR / KEY_FILE).read_text().strip()
        secrets |= {f"{gw.name} {form}": data for form, data in _key_forms(key).items()}
    for api in kube.api_servers(st):
        doc = yaml.safe_load(Path(api.kubeconfig).read_text())
        for user in doc.get("users") or []:
            for field, value in (user.get("user") or {}).items():
                if field in ("token", "client-key-data", "password") and value:
                    secrets[f"{api.name} {field}"] = str(value).encode()
    assert len(secrets) >= 4 * len(lab_layout.gateways)
    for name, data in gathered["members"].items():
        for what, secret in secrets.items():
            assert secret not in data, f"{name} holds {what}"
