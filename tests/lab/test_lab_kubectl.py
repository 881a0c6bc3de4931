"""Kernel test: the real kubectl drives a Globalnet kube lab (``magw lab kubectl``, docs/lab.md).

The smallest Globalnet clusterset that shows it: east (one gateway, pod ``batch-1`` in namespace ``shop``, no
GlobalEgressIP) and west (one gateway, the headless exported service ``direct`` over its pod, so the server
sees the client's global source). A GlobalEgressIP created with kubectl changes the source west's echo server
sees from east's cluster egress address to the new object's. Addresses are read from the emulators with the
lab's plain HTTP client (not from kubectl's output), the source from the echo server's answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from magw.lab.build.state import LabState
from magw.lab.planes import kube
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.kube_kubectl import kubectl_binary
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from tests.support.cli import MagwCli
from tests.support.globalnet_lab import pod_ns, seen

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

_SAME = {"pod_cidr": "10.0.0.0/16", "service_cidr": "100.0.0.0/16", "workers": 1, "pods_per_node": 1}
TOPOLOGY = {
    "globalnet": True,
    "clusters": [
        {"id": "east", **_SAME, "gateways": 1, "cluster_egress_ips": 1,
         "pods": [{"name": "batch-1", "namespace": "shop", "node": "w1", "labels": {"app": "batch"}}]},
        {"id": "west", **_SAME, "gateways": 1, "cluster_egress_ips": 1,
         "services": [{"name": "direct", "selector": {"app": "echo"}, "headless": True, "export": True}]},
    ],
}  # fmt: skip
GEIP = """apiVersion: submariner.io/v1
kind: GlobalEgressIP
metadata: {name: batch, namespace: shop}
spec: {numberOfIPs: 1, podSelector: {matchLabels: {app: batch}}}
"""
WAIT = 90.0


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    from tests.support.labkit import running_lab

    topo = parse_topology(TOPOLOGY, source="<kubectl lab test>")
    with running_lab(topo, daemons=True, control_plane="kube", wait_timeout=120.0) as lab:
        yield lab


def poll(what: str, read: Callable[[], Any], limit: float = WAIT) -> Any:
    deadline = time.monotonic() + limit
    while not (value := read()):
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not within {limit:g} s")
        time.sleep(0.5)
    return value


def _status_ips(st: LabState, cluster: str, kind: str, namespace: str, name: str) -> list[str]:
    for obj in kube.cluster_api(st, cluster).http().list(kind, namespace):
        if obj["metadata"]["name"] == name:
            return list((obj.get("status") or {}).get("allocatedIPs") or [])
    return []


def _direct_ip(st: LabState) -> IPv4Address:
    """The global IP of west's pod behind the headless service ``direct`` (its GlobalIngressIP)."""

    def read() -> str:
        for obj in kube.cluster_api(st, "west").http().list("GlobalIngressIP", "default"):
            if obj["metadata"]["name"] == "pod-w1-p1":
                return str((obj.get("status") or {}).get("allocatedIP") or "")
        return ""

    return IPv4Address(poll("west's pod w1-p1 has a global IP", read))


def test_kubectl_creates_a_globalegressip_and_the_server_sees_it(
    lab: tuple[LabLayout, LabState], magw_cli: MagwCli
) -> None:
    layout_, st = lab
    name = st.name
    kubectl_binary()  # a missing kubectl fails here, with its one line
    client = pod_ns(layout_, "east", "batch-1")
    target = _direct_ip(st)
    before = poll("batch-1 reaches west", lambda: seen(client, target, "tcp"))
    assert _status_ips(st, "east", "GlobalEgressIP", "shop", "batch") == []

    bad = magw_cli("lab", "kubectl", "east", "--name", name, "--", "apply", "-f", "-",
                   stdin=GEIP.replace("numberOfIPs", "numberOfIPz"))  # fmt: skip
    assert bad.returncode != 0 and 'unknown field "spec.numberOfIPz"' in bad.stderr
    applied = magw_cli("lab", "kubectl", "east", "--name", name, "--", "apply", "-f", "-", stdin=GEIP)
    assert applied.returncode == 0, applied.stderr
    assert "globalegressip.submariner.io/batch created" in applied.stdout
    waited = magw_cli("lab", "kubectl", "east", "--name", name, "--", "wait", "--for=condition=Allocated",
                      "globalegressip/batch", "-n", "shop", "--timeout=90s", timeout=120)  # fmt: skip
    assert waited.returncode == 0, waited.stderr
    allocated = _status_ips(st, "east", "GlobalEgressIP", "shop", "batch")
    assert len(allocated) == 1 and allocated[0] != before
    after = poll("the server sees the new global egress IP",
                 lambda: (s := seen(client, target, "tcp")) == allocated[0] and s)  # fmt: skip
    assert after == allocated[0]

    got = magw_cli("lab", "kubectl", "east", "--name", name, "--", "get", "globalegressips", "-n", "shop")
    header, row = got.stdout.splitlines()
    assert header.split()[:4] == ["NAME", "IPS", "ALLOCATED", "ADDRESSES"]
    assert row.split()[:3] == ["batch", "1", "True"] and allocated[0] in row

    status = json.loads(magw_cli("lab", "status", "--name", name, "--json").stdout)
    listed = {e["name"]: e for e in status["control_plane"]["emulators"]}
    assert sorted(listed) == ["broker", "east", "west"]
    for api in kube.api_servers(st):
        assert listed[api.name]["kubectl"] == f"magw lab kubectl {api.name} --name {name} -- ARGS"
        assert Path(listed[api.name]["kubectl_kubeconfig"]).read_text(encoding="utf-8").count("127.0.0.1:6443") == 1

    deleted = magw_cli("lab", "kubectl", "east", "--name", name, "--", "delete", "globalegressip", "batch",
                       "-n", "shop")  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    poll("the source goes back to the cluster egress IP", lambda: seen(client, target, "tcp") == before)
