"""The lab's network without the daemons: pods, host-gw routes, services, CNI masquerade, status, up/down.

Kernel tests: every lab has a unique random name and is removed after its test
(module fixture or context manager), also on failure. Independent checkers
(``ip -json``, ``bridge -json``, ``nft -j``, ``sysctl``) read back what the lab built.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from magw.lab.build import lifecycle as build
from magw.lab.build import netns, procs, services, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.spec import naming
from magw.lab.spec.layout import ECHO_PORT, LabLayout, layout
from magw.lab.spec.topology import default_topology, parse_topology
from magw.lab.verify.connectivity import ConnectivityResult, TrafficTarget, probe
from tests.support import netns as checker
from tests.support.cli import MagwCli
from tests.support.labkit import NOTHING_LEFT, leftovers, running_lab, unique_name
from tests.support.paths import EXAMPLES

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    """The default topology without daemons, shared by the read-only tests of this module."""
    with running_lab(default_topology(), daemons=False) as built:
        yield built


def test_every_pod_reaches_every_pod_of_its_cluster(lab: tuple[LabLayout, LabState]) -> None:
    """From the first pod of every node, every pod of the same cluster answers over TCP and UDP with our own IP."""
    layout_, _st = lab
    for cluster in layout_.clusters:
        for node in cluster.nodes:
            client = cluster.pods_of(node.name)[0]
            targets = [TrafficTarget(proto=p, ip=t.ip, port=ECHO_PORT) for t in cluster.pods for p in ("tcp", "udp")]
            results = probe(client.namespace, targets)
            assert [(r.target, r.ok, r.seen_ip) for r in results] == [(t, True, str(client.ip)) for t in targets]
            servers = [r.server for r in results]
            assert servers == [t.name for t in cluster.pods for _ in ("tcp", "udp")]


def test_local_service_is_dnat_to_its_backends(lab: tuple[LabLayout, LabState]) -> None:
    """A ClusterIP answers from its backend pods only, over TCP and UDP, and keeps the client's IP."""
    layout_, _st = lab
    east = layout_.clusters[0]
    svc = east.services[0]
    client = east.pods_of("east-w2")[1]
    targets = [TrafficTarget(proto=p, ip=svc.ip, port=svc.port) for p in ("tcp", "udp") for _ in range(12)]
    results = probe(client.namespace, targets)
    backend_names = {p.name for p in east.pods if p.ip in svc.backends}
    assert [(r.ok, r.seen_ip) for r in results] == [(True, str(client.ip))] * len(targets)
    assert {r.server for r in results} <= backend_names
    assert len({r.server for r in results}) >= 2  # 24 random picks among 4 backends: one backend only is ~1e-14


def test_service_from_the_node_itself(lab: tuple[LabLayout, LabState]) -> None:
    """The output hook DNATs traffic a node sends itself to a ClusterIP."""
    layout_, _st = lab
    west = layout_.clusters[1]
    node = west.nodes[0]
    results = probe(node.namespace, [TrafficTarget(proto="tcp", ip=west.services[0].ip, port=west.services[0].port)])
    assert results[0].ok is True
    assert results[0].server in {p.name for p in west.pods if p.ip in west.services[0].backends}


def test_masquerade_rewrites_pod_traffic_leaving_the_cluster(lab: tuple[LabLayout, LabState]) -> None:
    """A pod on an east gateway reaching a west gateway's WAN address is seen as the east gateway's WAN IP."""
    layout_, st = lab
    east_gw, west_gw = layout_.clusters[0].gateways[0], layout_.clusters[1].gateways[0]
    client = layout_.clusters[0].pods_of(east_gw.name)[0]
    server = procs.start(
        kind="test-server",
        owner=west_gw.name,
        namespace=west_gw.namespace,
        argv=[sys.executable, "-m", "magw.lab.payload.traffic", "serve", "--name", "wan-server", "--port", "9099",
              "--max-seconds", "60"],
        log_path=st.logs_dir / "test-wan-server.log",
    )  # fmt: skip
    try:
        assert west_gw.public_ip is not None
        targets = [TrafficTarget(proto=p, ip=west_gw.public_ip, port=9099) for p in ("tcp", "udp")]
        results = _retry_probe(client.namespace, targets)
    finally:
        procs.stop([server])
    assert [(r.ok, r.seen_ip) for r in results] == [(True, str(east_gw.public_ip))] * 2
    table = checker.nft_json(east_gw.namespace, "list", "table", "ip", services.CNI_TABLE)
    rules = [item["rule"] for item in table["nftables"] if "rule" in item]
    assert len(rules) == 1
    assert {"masquerade": None} in rules[0]["expr"]


def _retry_probe(ns: str, targets: list[TrafficTarget], rounds: int = 20) -> list[ConnectivityResult]:
    """Probe until every target answers (the server may still be starting), at most ``rounds`` times."""
    results = probe(ns, targets, timeout=1.0)
    for _ in range(rounds):
        if all(r.ok for r in results):
            break
        results = probe(ns, targets, timeout=1.0)
    return list(results)


def test_kernel_state_read_back(lab: tuple[LabLayout, LabState]) -> None:
    """ip/bridge/sysctl read back what the lab built: addresses, bridge ports, routes, sysctls, nft tables."""
    layout_, _st = lab
    east = layout_.clusters[0]
    w1 = east.nodes[2]
    pod = east.pods_of(w1.name)[0]
    addrs = checker.ip_json(pod.namespace, "-4", "addr", "show", "dev", naming.POD_IF)
    assert [(a["local"], a["prefixlen"]) for a in addrs[0]["addr_info"]] == [(str(pod.ip), 24)]
    default = checker.ip_json(pod.namespace, "route", "show", "default")
    assert [(r["gateway"], r["dev"]) for r in default] == [(str(w1.cni_ip), naming.POD_IF)]
    ports = checker.bridge_json(east.underlay_ns, "link", "show")
    assert sorted(p["ifname"] for p in ports if p.get("master") == naming.BRIDGE) == ["gw1", "gw2", "w1", "w2"]
    cni_ports = checker.bridge_json(w1.namespace, "link", "show")
    assert sorted(p["ifname"] for p in cni_ports if p.get("master") == naming.CNI_BRIDGE) == ["p1", "p2"]
    routes = checker.ip_json(w1.namespace, "-4", "route", "show", "dev", naming.UNDERLAY_IF)
    assert sorted((r["dst"], r.get("gateway")) for r in routes if "gateway" in r) == sorted(
        (str(n.pod_subnet), str(n.node_ip)) for n in east.nodes if n.name != w1.name
    )
    for key, value in (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "0")):
        assert checker.run(w1.namespace, "sysctl", "-n", key).stdout.strip() == value
    tables = checker.nft_json(w1.namespace, "list", "tables")["nftables"]
    assert sorted(t["table"]["name"] for t in tables if "table" in t) == ["lab-cni", "lab-kube"]
    wan_ports = checker.bridge_json(layout_.wan_ns, "link", "show")
    assert sorted(p["ifname"] for p in wan_ports) == ["east-gw1", "east-gw2", "west-gw1", "west-gw2"]


def test_status_json_shape(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """`magw lab status --json` lists clusters with nodes, pods, services and gateways, and live processes."""
    layout_, st = lab
    out = magw_cli("lab", "status", "--name", st.name, "--json", timeout=60, check=True).stdout
    doc = json.loads(out)
    assert doc["name"] == st.name
    assert doc["phase"] == "up"
    assert [c["id"] for c in doc["clusters"]] == ["east", "west"]
    east = doc["clusters"][0]
    assert east["nodes"][0] == {
        "name": "east-gw1",
        "role": "gateway",
        "namespace": f"{st.name}-east-gw1",
        "node_ip": "172.17.0.11",
        "cni_ip": "10.1.1.1",
    }
    assert east["pods"][0] == {"name": "east-gw1-p1", "namespace": f"{st.name}-east-gw1-p1", "ip": "10.1.1.2",
                               "node": "east-gw1"}  # fmt: skip
    assert [(s["name"], s["ip"], s["port"]) for s in east["services"]] == [("echo", "100.1.0.10", 8080)]
    assert [g["public_ip"] for g in east["gateways"]] == ["198.18.0.11", "198.18.0.12"]
    assert doc["daemons"] == []
    assert [s["alive"] for s in doc["servers"]] == [True] * len(layout_.pods)
    assert doc["namespaces"] == {"expected": len(layout_.namespaces), "present": len(layout_.namespaces)}


def test_up_refuses_an_existing_lab(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """A second `up` with the same name fails with exit 1 and leaves the running lab intact."""
    layout_, st = lab
    proc = magw_cli("lab", "up", "--no-daemons", "--name", st.name, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"magw: error: lab up: lab {st.name!r} already exists (remove it with: magw lab down --name {st.name})"
    )
    assert [netns.exists(ns) for ns in layout_.namespaces] == [True] * len(layout_.namespaces)
    assert state.read(st.name) == st


def test_two_labs_side_by_side(lab: tuple[LabLayout, LabState]) -> None:
    """A second lab with the same topology runs next to the first; removing it leaves the first working."""
    layout_a, _st_a = lab
    with running_lab(default_topology(), daemons=False) as (layout_b, st_b):
        for lay in (layout_a, layout_b):
            pods = lay.clusters[0].pods
            results = probe(pods[0].namespace, [TrafficTarget(proto="tcp", ip=pods[-1].ip, port=ECHO_PORT)])
            assert (results[0].ok, results[0].server) == (True, pods[-1].name)
        b_procs = st_b.processes
    assert leftovers(st_b.name, b_procs) == NOTHING_LEFT
    assert [netns.exists(ns) for ns in layout_a.namespaces] == [True] * len(layout_a.namespaces)
    pods = layout_a.clusters[1].pods
    assert probe(pods[0].namespace, [TrafficTarget(proto="udp", ip=pods[-1].ip, port=ECHO_PORT)])[0].ok is True


def test_cli_up_then_down_leaves_nothing(magw_cli: MagwCli) -> None:
    """`magw lab up --no-daemons` then `magw lab down`: no namespace, process or state file of the lab remains."""
    name = unique_name()
    topo = EXAMPLES / "lab-three-clusters.yaml"
    try:
        up = magw_cli("lab", "up", "--no-daemons", "--name", name, "--topology", str(topo))
        assert up.returncode == 0, up.stderr
        st = state.read(name)
        assert st is not None
        n_pods = len(layout(name, st.topology).pods)
        assert n_pods == 9
        assert [(p.kind, procs.alive(p)) for p in st.processes] == [("echo", True)] * n_pods
    finally:
        down = magw_cli("lab", "down", "--name", name)
    assert down.returncode == 0
    assert down.stdout.strip() == f"lab {name}: removed {len(st.namespaces)} namespaces, 9 processes"
    assert leftovers(name, st.processes) == NOTHING_LEFT


def test_failed_up_cleans_up_after_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """When a step of `up` fails (here: an nft script the kernel refuses), `up` removes what it built."""
    name = unique_name()
    monkeypatch.setattr(services, "node_script", lambda cluster: "table ip lab-kube { chain c { bogus } }\n")
    try:
        with pytest.raises(LabError, match=r"nft -f -: .*syntax error"):
            build.up(default_topology(), name=name, daemons=False)
        assert leftovers(name, []) == NOTHING_LEFT
    finally:
        build.down(name)
        for kept in Path(tempfile.gettempdir()).glob(f"magw-lab-{name}-failed-*"):  # the failed up's files
            shutil.rmtree(kept, ignore_errors=True)


def test_down_after_a_crash_removes_the_marked_namespaces() -> None:
    """With its state file gone (a crashed `up`), `down` still removes the lab's (marked) namespaces and processes."""
    name = unique_name()
    topo = parse_topology({"clusters": [{"id": "a", "gateways": 1, "workers": 0, "pods_per_node": 1},
                                        {"id": "b", "gateways": 1, "workers": 0, "pods_per_node": 1}]})  # fmt: skip
    try:
        st = build.up(topo, name=name, daemons=False)
        (naming.state_dir(name) / state.STATE_FILE).unlink()
        report = build.down(name)
        assert sorted(report.namespaces) == sorted(st.namespaces)
        assert sorted(report.processes) == sorted(p.pid for p in st.processes)
        assert leftovers(name, st.processes) == NOTHING_LEFT
    finally:
        build.down(name)
