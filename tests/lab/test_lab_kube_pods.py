"""Kernel test: pods created through a kube lab's API servers run (the lab kubelet), and ``magw verify`` and
``magw benchmark`` in Kubernetes mode measure the clusterset with them (docs/verify.md, docs/benchmark.md).

Two labs of two clusters, east with two gateways, west with one, a worker each: a plain one, and a Globalnet one
with the same CIDRs in both clusters. What a check expects is read from
the lab itself (its layout, the emulators' Pod statuses, the network namespaces present), not from the code
under test.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import pytest

from magw.lab.build import netns
from magw.lab.build.state import LabState
from magw.lab.planes import kube
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.kube_http import KubeHttp, _UnixConnection
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from tests.support.cli import MagwCli

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

_NODES = {"gateways": 1, "workers": 1, "pods_per_node": 1}
PLAIN = {"clusters": [{"id": "east", **_NODES, "gateways": 2}, {"id": "west", **_NODES}]}
_SAME = {"pod_cidr": "10.0.0.0/16", "service_cidr": "100.0.0.0/16", "cluster_egress_ips": 1, **_NODES}
GLOBALNET = {"globalnet": True, "clusters": [{"id": "east", **_SAME, "gateways": 2}, {"id": "west", **_SAME}]}
TRAFFIC = ["python", "-m", "magw.lab.payload.traffic"]


def _lab(topology: dict[str, Any]) -> Iterator[tuple[LabLayout, LabState]]:
    from tests.support.labkit import running_lab

    topo = parse_topology(topology, source="<kube pods test>")
    with running_lab(topo, daemons=True, control_plane="kube", wait_timeout=120.0) as lab:
        yield lab


@pytest.fixture(scope="module")
def plain() -> Iterator[tuple[LabLayout, LabState]]:
    yield from _lab(PLAIN)


@pytest.fixture(scope="module")
def globalnet() -> Iterator[tuple[LabLayout, LabState]]:
    yield from _lab(GLOBALNET)


def poll(what: str, read: Callable[[], Any], limit: float = 30.0) -> Any:
    deadline = time.monotonic() + limit
    while not (value := read()):
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not within {limit:g} s")
        time.sleep(0.2)
    return value


def _http(st: LabState, cluster: str) -> KubeHttp:
    return kube.cluster_api(st, cluster).http()


def _pod(name: str, argv: list[str], *, policy: str = "Never", node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": policy, "containers": [{"name": "c", "image": "magw:0.1.0",
                                                                    "command": argv}]}  # fmt: skip
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _get(http: KubeHttp, name: str) -> dict[str, Any]:
    return http.request("GET", f"/api/v1/namespaces/default/pods/{name}")


def _phase(http: KubeHttp, name: str, *phases: str) -> dict[str, Any] | None:
    pod = _get(http, name)
    return pod if (pod.get("status") or {}).get("phase") in phases else None


def _log(st: LabState, cluster: str, name: str) -> tuple[int, str]:
    conn = _UnixConnection(str(kube.cluster_api(st, cluster).socket), 10.0)
    try:
        conn.request("GET", f"/api/v1/namespaces/default/pods/{name}/log")
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def _sandboxes(st: LabState) -> list[str]:
    """The lab kubelet's pod namespaces (``<lab>-<cluster>-<node>-k<slot>``)."""
    return [ns for ns in netns.list_namespaces()
            if ns.startswith(f"{st.name}-") and re.fullmatch(r"k\d+", ns.rsplit("-", 1)[-1])]  # fmt: skip


def _delete(http: KubeHttp, name: str) -> None:
    http.request("DELETE", f"/api/v1/namespaces/default/pods/{name}")


def test_a_pod_runs_reaches_the_other_cluster_and_is_cleaned_up(plain: tuple[LabLayout, LabState]) -> None:
    lab, st = plain
    target = lab.cluster("west").pods[0]
    east = _http(st, "east")
    worker = next(n.name for n in lab.cluster("east").nodes if not n.gateway)
    argv = [*TRAFFIC, "probe", "--target", f"tcp:{target.ip}:8080", "--target", f"udp:{target.ip}:8080"]
    east.create(_pod("probe-1", argv, node=worker))
    pod = poll("probe-1 ended", lambda: _phase(east, "probe-1", "Succeeded", "Failed"))
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    ip = IPv4Address(pod["status"]["podIP"])
    assert ip in lab.node(worker).pod_subnet and ip not in {p.ip for p in lab.pods}
    assert pod["status"]["hostIP"] == str(lab.node(worker).node_ip)
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")
    status, text = _log(st, "east", "probe-1")
    lines = [json.loads(line) for line in text.splitlines()]
    assert status == 200 and len(lines) == 2
    assert all(x["ok"] and x["seen_ip"] == str(ip) and x["server"] == target.name for x in lines), lines
    assert poll("the finished pod's sandbox is gone", lambda: not _sandboxes(st))
    _delete(east, "probe-1")
    assert poll("the log is gone with the pod", lambda: _log(st, "east", "probe-1")[0] == 404)


def test_what_the_image_does_not_ship_is_refused(plain: tuple[LabLayout, LabState]) -> None:
    _, st = plain
    east = _http(st, "east")
    east.create(_pod("shell-1", ["sh", "-c", "echo hi"]))
    pod = poll("shell-1 refused", lambda: _phase(east, "shell-1", "Failed"))
    assert pod["status"]["reason"] == "LabKubeletRefused"
    assert "runs only what the magw image ships" in pod["status"]["message"]
    assert _sandboxes(st) == []
    _delete(east, "shell-1")


def test_a_failing_container_is_restarted_and_stopped_on_delete(plain: tuple[LabLayout, LabState]) -> None:
    _, st = plain
    west = _http(st, "west")
    # a probe of an address nobody has exits 1
    west.create(_pod("crash-1", [*TRAFFIC, "probe", "--target", "tcp:192.0.2.1:9", "--timeout", "0.1"],
                     policy="OnFailure"))  # fmt: skip
    pod = poll("crash-1 restarted", lambda: (p := _get(west, "crash-1")) and
               (p.get("status") or {}).get("containerStatuses", [{}])[0].get("restartCount", 0) >= 1 and p)  # fmt: skip
    assert pod["status"]["phase"] == "Running"
    assert len(_sandboxes(st)) == 1
    _delete(west, "crash-1")
    assert poll("the sandbox is removed with the pod", lambda: not _sandboxes(st))


def test_kubectl_runs_a_pod_and_reads_its_log(plain: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    lab, st = plain
    target = lab.cluster("east").pods[0]
    run = magw_cli("lab", "kubectl", "west", "--name", st.name, "--", "run", "kc-1", "-n", "default",
                   "--image=magw:0.1.0", "--restart=Never", "--command", "--", *TRAFFIC, "probe", "--target",
                   f"udp:{target.ip}:8080")  # fmt: skip
    assert run.returncode == 0, run.stderr
    west = _http(st, "west")
    pod = poll("kc-1 ended", lambda: _phase(west, "kc-1", "Succeeded", "Failed"))
    logs = magw_cli("lab", "kubectl", "west", "--name", st.name, "--", "logs", "kc-1", "-n", "default")
    assert logs.returncode == 0, logs.stderr
    line = json.loads(logs.stdout.strip())
    assert line["ok"] and line["seen_ip"] == pod["status"]["podIP"]
    _delete(west, "kc-1")


def _kubeconfigs(st: LabState) -> list[str]:
    return [arg for c in ("east", "west") for arg in ("--kubeconfig", str(kube.cluster_api(st, c).kubeconfig))]


def _verify_pods_left(st: LabState) -> list[str]:
    return [f"{c}/{p['metadata']['name']}" for c in ("east", "west") for p in _http(st, c).list("Pod")
            if (p["metadata"].get("labels") or {}).get("app") == "magw-verify"]  # fmt: skip


def test_verify_kube_mode_passes_with_every_pods_own_source(
    plain: tuple[LabLayout, LabState], magw_cli: MagwCli
) -> None:
    """Pod to remote pod by pod IP (the server saw the client pod's own IP) and to a remote Service by the ClusterIP
    the API server gave it (the lab kubelet's kube-proxy DNATs it to the pod), both ways, TCP and UDP."""
    lab, st = plain
    done = magw_cli("verify", *_kubeconfigs(st), "--json", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] and doc["mode"] == "kube" and doc["clusters"] == ["east", "west"] and doc["failing"] == []
    # Every gateway of both clusters carried some of the 32 traced flows of each pair, both ways, and lost none.
    rows = doc["gateways"]
    assert sorted((g["pair"], g["gateway"]) for g in rows) == sorted(
        (p, g) for p in ("east -> west", "west -> east") for g in ("east-gw1", "east-gw2", "west-gw1"))  # fmt: skip
    for g in rows:
        assert g["ok"] and g["flows"] == 32 and g["dead"] == 0 and (g["toward"] or g["back"]), g
    for p in ("east -> west", "west -> east"):
        assert sum(g["toward"] for g in rows if g["pair"] == p and g["cluster"] == "east") >= 32
    checks = doc["checks"]
    assert sorted((c["client"].split("/")[0], c["target"].split("/")[0], c["check"], c["proto"]) for c in checks) == [
        (a, b, kind, p) for a, b in (("east", "west"), ("west", "east")) for kind in ("pod", "service")
        for p in ("tcp", "udp")]  # fmt: skip
    for c in checks:
        server_cluster = lab.cluster(c["target"].split("/")[0])
        if c["check"] == "pod":
            assert IPv4Address(c["address"]) in server_cluster.pod_cidr and c["via"] == "pod IP"
            assert f"saw the pod's own source {c['client_ip']}" in c["detail"]
        else:
            assert IPv4Address(c["address"]) in kube.service_ip_range(server_cluster) and c["via"] == "ClusterIP"
            assert c["detail"].startswith(f"answered by {server_cluster.id}/magw-verify-server-")
    assert poll("verify's pods deleted", lambda: not _verify_pods_left(st))
    assert poll("their sandboxes removed", lambda: not _sandboxes(st))
    assert not [s for c in ("east", "west") for s in _http(st, c).list("Service", "magw-verify")]


def test_benchmark_kube_mode_measures_both_placements(plain: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    lab, st = plain
    done = magw_cli("benchmark", "latency", *_kubeconfigs(st), "--count", "20", "--json", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    rows = doc["results"]
    assert doc["clusters"] == ["east", "west"] and doc["lab"] is None
    assert sorted((r["between"], r["latency"]["proto"]) for r in rows) == [
        ("gateways", "tcp"), ("gateways", "udp"), ("pods", "tcp"), ("pods", "udp")]  # fmt: skip
    for r in rows:
        node = lab.node(r["server_node"])
        assert node.gateway == (r["between"] == "gateways") and node.cluster == "west"
        assert IPv4Address(r["target"]) in node.pod_subnet
        assert r["latency"]["received"] == 20 and 0 < r["latency"]["p50_us"] < 1e6
    done = magw_cli("benchmark", "throughput", *_kubeconfigs(st), "--duration", "1", "--between", "gateways",
                    "--json", timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = json.loads(done.stdout)["results"]
    assert row["throughput"]["received_bps"] > 1e6 and row["client_node"] == "east-gw1"
    assert poll("the benchmark's pods deleted", lambda: not _verify_pods_left(st))


def _our_tables(lab: LabLayout) -> list[str]:
    """The verify tables (tracers', the fail pod's) still in any node's namespace."""
    return [f"{n.name}: {line}" for n in lab.nodes for line in netns.ns_exec(n.namespace, "nft", "list", "tables")
            .splitlines() if "magw_verify" in line]  # fmt: skip


def test_verify_kube_mode_failover_moves_the_victims_flows_and_restores_it(
    plain: tuple[LabLayout, LabState], magw_cli: MagwCli
) -> None:
    """``--failover`` through the API: east has two gateways, so the first of them is the victim; the flows that
    crossed it run through the other at the end, none stays lost, and the victim's datapath comes back."""
    lab, st = plain
    victim = next(c for c in lab.clusters if len(c.gateways) >= 2).gateways[0].name
    done = magw_cli("verify", *_kubeconfigs(st), "--flows", "0", "--failover", "--yes", "--json", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    fo = doc["failover"]
    assert doc["ok"] and doc["failover_problem"] is None and fo["ok"] and fo["victim"] == victim
    assert fo["summary"]["flows"] == 32 and len(fo["flows"]) == 32
    crossed = [f for f in fo["flows"] if f["crossed_victim"]]
    assert crossed, "no flow crossed the victim before it failed"
    assert all(victim not in f["after"]["toward"] + f["after"]["back"] for f in fo["flows"])
    assert all(f["moved"] for f in crossed if victim in f["before"]["toward"])
    assert all(f["after"]["toward"] for f in fo["flows"]), "a flow ran through no east gateway at the end"
    assert all(f["lost_tail"] == 0 for f in fo["flows"])
    assert fo["target"].endswith("(pod IP)") and fo["client"].startswith("east/")
    assert poll("verify's pods deleted", lambda: not _verify_pods_left(st))
    assert poll("every tracer's and the fail pod's table removed", lambda: not _our_tables(lab))
    again = magw_cli("verify", *_kubeconfigs(st), "--json", timeout=180)  # the victim carries traffic again
    assert again.returncode == 0, again.stdout + again.stderr
    assert all(g["ok"] for g in json.loads(again.stdout)["gateways"] if g["gateway"] == victim)


def test_verify_kube_mode_names_the_failing_pairs(plain: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    _, st = plain
    failed = magw_cli("lab", "fail", "--name", st.name, "west-gw1")
    assert failed.returncode == 0, failed.stderr
    try:
        done = magw_cli("verify", *_kubeconfigs(st), "--timeout", "0.5", "--json", timeout=180)
        assert done.returncode == 1, done.stdout + done.stderr
        doc = json.loads(done.stdout)
        assert not doc["ok"] and doc["trace_problem"] is None
        # West's only gateway is down: every check fails, and its trace ends where west-gw1 should have been, the
        # first hop after east's gateways one way and after west's worker the other.
        assert len(doc["checks"]) == 8 and not any(c["ok"] for c in doc["checks"])
        for c in doc["checks"]:
            assert "TimeoutError" in c["detail"] or "refused" in c["detail"] or "unreachable" in c["detail"], c
            before = "east-gw[12]" if c["client"].startswith("east/") else "west-w1"
            assert re.fullmatch(rf"request died at {before} -> a west gateway \(west-gw1\)", c["hop"] or ""), c
        # Every gateway row fails: west-gw1 carried nothing, east's carried nothing back (or nothing at all).
        rows = {(g["pair"], g["gateway"]): g for g in doc["gateways"]}
        assert sorted(rows) == sorted((p, g) for p in ("east -> west", "west -> east")
                                      for g in ("east-gw1", "east-gw2", "west-gw1"))  # fmt: skip
        assert not any(g["ok"] for g in rows.values())
        assert all(rows[(p, "west-gw1")]["toward"] == rows[(p, "west-gw1")]["back"] == 0 for p in ("east -> west",
                                                                                                  "west -> east"))
        assert len(doc["failing"]) == 8 + 6
    finally:
        recovered = magw_cli("lab", "recover", "--name", st.name, "west-gw1")
        assert recovered.returncode == 0, recovered.stderr
    assert poll("verify's pods deleted", lambda: not _verify_pods_left(st))


def test_verify_and_benchmark_kube_mode_by_global_ip(globalnet: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    lab, st = globalnet
    done = magw_cli("verify", *_kubeconfigs(st), "--json", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] and len(doc["checks"]) == 8 and {c["check"] for c in doc["checks"]} == {"pod", "service"}
    for c in doc["checks"]:
        client, server = (lab.cluster(x.split("/")[0]) for x in (c["client"], c["target"]))
        assert server.global_cidr is not None and client.global_cidr is not None
        assert c["via"] == "global IP" and IPv4Address(c["address"]) in IPv4Network(server.global_cidr)
        seen = c["detail"].rstrip(")").rsplit(" ", 1)[-1]
        assert IPv4Address(seen) in IPv4Network(client.global_cidr), c
    # A second run within conntrack's timeouts, with --failover: its new stream pods are SNATed to the same egress
    # IP as the first run's, yet every flow is seen under its own client port on west's gateway too.
    done = magw_cli("verify", *_kubeconfigs(st), "--failover", "--yes", "--json", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    fo = doc["failover"]
    assert doc["ok"] and fo["ok"] and fo["victim"] == "east-gw1" and fo["target"].endswith("(global IP)")
    assert all(g["ok"] for g in doc["gateways"]) and len(doc["gateways"]) == 6
    assert all("west-gw1" in f["before"]["toward"] and "west-gw1" in f["after"]["toward"] for f in fo["flows"])
    crossed = [f for f in fo["flows"] if f["crossed_victim"]]
    assert crossed and all("east-gw1" not in f["after"]["toward"] + f["after"]["back"] for f in fo["flows"])
    assert all(f["lost_tail"] == 0 for f in fo["flows"])
    done = magw_cli("benchmark", "latency", *_kubeconfigs(st), "--count", "10", "--proto", "udp", "--between",
                    "pods", "--json", timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = json.loads(done.stdout)["results"]
    assert row["via"] == "global IP" and row["latency"]["received"] == 10
    assert IPv4Address(row["target"]) in IPv4Network(lab.cluster("west").global_cidr or "0.0.0.0/32")
    assert poll("verify's pods deleted", lambda: not _verify_pods_left(st))
