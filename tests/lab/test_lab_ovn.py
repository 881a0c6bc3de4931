"""Kernel test: ``magw lab up --cni ovn`` and ``magw lab verify`` (docs/lab.md, "--cni ovn").

A small lab (east with two gateways and a worker, west with one gateway and a worker), through the CLI as a
user runs it; its pods talk through OVN for real (every node's Open vSwitch and ovn-controller). The oracles are
independent of the lab's own verifier where it matters: the NB policy read with ``ovn-nbctl`` after a gateway
goes down, ``ovn-trace`` buckets re-run here, the kernel's own counters and routes for the packets; ``down`` is
checked with the lab tests' leftovers helper plus a look for any process still holding the lab's files (every
OVS and OVN server, ovs-vswitchd and ovn-controller of the lab runs with paths in its state directory).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from magw.lab.build import procs, state
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.ovn import ovn_dir, syncer_host
from magw.lab.planes.ovn_servers import ovn_missing
from magw.lab.planes.ovn_topology import nbctl, wait_sb
from magw.lab.spec import naming
from magw.lab.spec.layout import ECHO_PORT, layout
from magw.lab.spec.topology import default_topology, load_topology
from magw.lab.verify.connectivity import TrafficTarget, probe
from tests.support.cli import MagwCli
from tests.support.labkit import NOTHING_LEFT, leftovers, ovn_join_address, ovn_router, unique_name
from tests.support.paths import EXAMPLES

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ovn,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

TOPOLOGY = """\
clusters:
  - {id: east, gateways: 2, workers: 1, pods_per_node: 1}
  - {id: west, gateways: 1, workers: 1, pods_per_node: 1}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, magw_cli: MagwCli) -> Iterator[LabState]:
    reason = ovn_missing()
    if reason:
        pytest.skip(reason)
    name = unique_name()
    topo = tmp_path_factory.mktemp("ovnlab") / "lab.yaml"
    topo.write_text(TOPOLOGY)
    try:
        up = magw_cli("lab", "up", "--name", name, "--cni", "ovn", "--topology", str(topo), "--timeout", "60")
        assert up.returncode == 0, up.stdout + up.stderr
        st = state.read(name)
        assert st is not None
        yield st
    finally:
        magw_cli("lab", "down", "--name", name)


def verify_lines(magw_cli: MagwCli, st: LabState) -> tuple[int, list[str]]:
    out = magw_cli("lab", "verify", "--name", st.name)
    return out.returncode, out.stdout.splitlines()


def test_up_runs_an_ovn_control_plane_and_verify_passes(lab: LabState, magw_cli: MagwCli) -> None:
    doc = magw_cli("lab", "status", "--name", lab.name, "--json")
    assert doc.returncode == 0, doc.stderr
    assert '"cni": "ovn"' in doc.stdout
    ovn = {c["cluster"]: c for c in json.loads(doc.stdout)["ovn"]["clusters"]}
    assert ovn["east"]["processes"]["ovn-syncer"]["host"] == "east-w1"  # hosted by the first worker's route agent
    nodes = ovn["east"]["nodes"]
    alive = {node: tuple(sorted(k for k, p in kinds.items() if p["alive"])) for node, kinds in nodes.items()}
    assert alive == dict.fromkeys(("east-gw1", "east-gw2", "east-w1"), ("ovn-controller", "ovs-db", "ovs-vswitchd"))
    text = magw_cli("lab", "status", "--name", lab.name).stdout
    assert "processes all alive; syncer ok" in text, text
    rc, lines = verify_lines(magw_cli, lab)
    assert rc == 0, "\n".join(lines)
    checks = [line for line in lines if line.startswith(("OK", "FAIL"))]
    by_how = {how: [c for c in checks if c.split()[1] == how] for how in ("trace", "state", "packet")}
    # trace, per cluster: 2 targets per node of every other cluster (egress), one ECMP check per remote cluster,
    # one ingress check per uplink per node: east 3*2 + 1 + 2*3, west 2*2 + 1 + 1*2. state: one per worker and
    # remote cluster, two per gateway (table 149, br-submariner): east 1 + 2*2, west 1 + 1*2. packet: the first
    # pod of each node to the other cluster's first pod and service over TCP and UDP, (3 + 2) * 4, and one ECMP
    # line per ordered pair of clusters.
    assert [len(by_how[h]) for h in ("trace", "state", "packet")] == [13 + 7, 5 + 3, 20 + 2], "\n".join(lines)
    assert all(c.startswith("OK") for c in checks), "\n".join(lines)
    ecmp = next(c for c in by_how["trace"] if "ecmp" in c and "east -> west" in c)
    assert "reach east-gw1, east-gw2" in ecmp
    flows = next(c for c in by_how["packet"] if "ecmp" in c and "east -> west" in c)
    assert "(expected east-gw1, east-gw2)" in flows, flows
    assert lines[-1] == "== 50/50 OK"


def test_pods_talk_through_ovn(lab: LabState) -> None:
    """Packets, with the kernel as the oracle: a west pod reaches an east worker's pod and the server sees the
    client's own address; the worker's kernel has no route to west at all outside table 150 (its pods' packets
    cannot have taken a kernel path), and the east gateways' ovn-k8s-sub0 (the localnet path between OVN and
    the host) and the worker's OVN tunnel leg counted the packets."""
    lab_ = layout(lab.name, lab.topology)
    east, west = lab_.cluster("east"), lab_.cluster("west")
    worker = next(n for n in east.nodes if not n.gateway)
    server = east.pods_of(worker.name)[0]
    routes = subprocess.run(["ip", "-n", worker.namespace, "-j", "route", "show", "table", "main"],
                            capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip
    assert str(west.pod_cidr) not in routes and "10.2." not in routes, routes

    def counters() -> list[int]:
        return [_rx_tx(gw.namespace, "ovn-k8s-sub0") for gw in east.gateways] + [_rx_tx(worker.namespace, "eth1")]

    before = counters()
    res = probe(west.pods[0].namespace, [TrafficTarget(proto=p, ip=server.ip, port=ECHO_PORT) for p in ("tcp", "udp")])
    assert [(r.ok, r.server, r.seen_ip) for r in res] == [(True, server.name, str(west.pods[0].ip))] * 2, res
    after = counters()
    assert sum(after[:-1]) > sum(before[:-1]), (before, after)  # through a gateway's localnet path
    assert after[-1] > before[-1], (before, after)  # and over geneve to the worker


def _rx_tx(ns: str, dev: str) -> int:
    doc = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev],
                         capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip
    stats = json.loads(doc)[0]["stats64"]
    return int(stats["rx"]["packets"]) + int(stats["tx"]["packets"])


def test_route_agents_run_in_ovn_mode(lab: LabState) -> None:
    """The kernel's own lookups, here and not through the verifier: a worker's host traffic to west leaves by
    ovn-k8s-mp0 (table 150), a gateway sends what arrives from west's tunnel into OVN by ovn-k8s-sub0 (table 149),
    and the gateway's ovs-vswitchd has ovn-k8s-sub0 on br-submariner, patched to br-int by ovn-controller."""
    lab_ = layout(lab.name, lab.topology)
    east, west = lab_.cluster("east"), lab_.cluster("west")
    worker = next(n for n in east.nodes if not n.gateway)
    got = subprocess.run(
        ["ip", "-n", worker.namespace, "route", "get", str(west.pods[0].ip)],
        capture_output=True, text=True, timeout=10, check=True,
    ).stdout  # fmt: skip
    assert f"via {worker.cni_ip} dev ovn-k8s-mp0 table 150" in got, got  # the node's rtos- port (its subnet's .1)
    gw = east.gateways[0]
    got = subprocess.run(
        ["ip", "-n", gw.namespace, "route", "get", str(east.pods[0].ip), "from", str(west.pods[0].ip),
         "iif", "vxlan-tunnel"],
        capture_output=True, text=True, timeout=10, check=True,
    ).stdout  # fmt: skip
    assert "via 169.254.254.9 dev ovn-k8s-sub0 table 149" in got, got
    d = lab.dir / "ovs" / gw.name
    ports = subprocess.run(
        ["ovs-vsctl", f"--db=unix:{d}/db.sock", "--timeout=5", "list-ports", "br-submariner"],
        capture_output=True, text=True, timeout=10, check=True, env={"OVS_RUNDIR": str(d), "PATH": "/usr/bin:/bin"},
    ).stdout.split()  # fmt: skip
    # ours, and the patch ovn-controller made to br-int for the localnet port of this gateway's uplink switch
    assert ports[0] == "ovn-k8s-sub0" and len(ports) == 2, ports
    assert re.fullmatch(r"patch-submariner_gateway_localnet(_\d)?-to-br-int", ports[1]), ports


def _routers_by_bucket(st: LabState, buckets: int) -> set[str]:
    """Which gateway router each ECMP bucket of east's first pod toward west leads through (ovn-trace here, not
    the verifier)."""
    lab = layout(st.name, st.topology)
    east, west = lab.cluster("east"), lab.cluster("west")
    pod = east.pods[0]
    d = ovn_dir(st, "east")
    mac = nbctl(d, "lsp-get-addresses", f"default_{pod.name}").split()[0]
    rtos = nbctl(d, "get", "Logical_Router_Port", f"rtos-{pod.node}", "mac").strip().strip('"')
    flow = (
        f'inport == "default_{pod.name}" && eth.src == {mac} && eth.dst == {rtos} && ip4.src == {pod.ip} && '
        f"ip4.dst == {west.pods[0].ip} && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == 8080"
    )
    routers: set[str] = set()
    for b in range(1, buckets + 1):
        out = subprocess.run(
            ["ovn-trace", f"--db={d.sb}", "--detailed", "--ct=new,trk", f"--select-id={b}", pod.node, flow],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
        routers |= set(re.findall(r'dp="(submariner_router[^"]*)"', out))
    return routers


def test_a_gateway_marked_down_leaves_the_ecmp_set(lab: LabState, magw_cli: MagwCli) -> None:
    assert _routers_by_bucket(lab, 2) == {"submariner_router", "submariner_router_2"}
    gw2_join = ovn_join_address(lab, "east", "east-gw2")
    health = lab.broker_dir / "health.yaml"
    tmp = lab.broker_dir / ".health.yaml.tmp"
    tmp.write_text("kind: Health\ndown: [east-gw2]\n")
    tmp.rename(health)
    d = ovn_dir(lab, "east")
    deadline = time.monotonic() + 20
    while True:
        hops = nbctl(d, "--bare", "--columns=nexthops", "list", "Logical_Router_Policy").split()
        if hops and gw2_join not in hops:  # east-gw2's join address left the policy
            break
        assert time.monotonic() < deadline, f"the syncer did not take east-gw2 out of the policy: {hops}"
        time.sleep(0.2)
    wait_sb(d)
    assert _routers_by_bucket(lab, 2) == {ovn_router(lab, "east", "east-gw1")}
    rc, lines = verify_lines(magw_cli, lab)
    assert rc == 0, "\n".join(lines)
    ecmp = next(line for line in lines if "ecmp" in line and "east -> west" in line)
    assert "1 bucket(s) reach east-gw1 (expected east-gw1)" in ecmp
    assert not any("egress" in line and "on east-gw2" in line for line in lines), "\n".join(lines)


def test_verify_refuses_a_generic_lab_and_an_unknown_lab(magw_cli: MagwCli) -> None:
    out = magw_cli("lab", "verify", "--name", "nosuchlab1")
    assert out.returncode == 2 and "no lab named 'nosuchlab1'" in out.stderr
    # A generic lab is refused from its state file alone: no network is needed for that.
    name = unique_name()
    st = LabState(name=name, topology=default_topology(), phase="up", daemons=False, token="x")
    try:
        state.write(st)
        out = magw_cli("lab", "verify", "--name", name)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "built with --cni generic; verify is for --cni ovn labs" in out.stderr
        # An OVN lab with Globalnet too: its pods' addresses overlap, which the checks cannot tell apart.
        topo = load_topology(EXAMPLES / "lab-globalnet.yaml")
        state.write(LabState(name=name, topology=topo, phase="up", daemons=False, token="x", cni="ovn"))
        out = magw_cli("lab", "verify", "--name", name)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "has globalnet: true; verify's checks address pods by their (overlapping) pod IPs" in out.stderr
    finally:
        shutil.rmtree(naming.state_dir(name), ignore_errors=True)


def test_verify_fails_when_the_reroute_is_gone(lab: LabState, magw_cli: MagwCli) -> None:
    """With east's syncer stopped (its host, a route agent, by its PID) and its reroute policy deleted behind its
    back, east's pods' packets to west no longer reach a gateway router: verify says FAIL for each, in the traces
    and with packets, and exits 1."""
    host = syncer_host(layout(lab.name, lab.topology).cluster("east"))
    assert host is not None
    agent = next(p for p in lab.processes if p.kind == "route-agent" and p.owner == host.name)
    procs.stop([agent])
    d = ovn_dir(lab, "east")
    nbctl(d, "lr-policy-del", "ovn_cluster_router", "20000")
    rc, lines = verify_lines(magw_cli, lab)
    assert rc == 1, "\n".join(lines)
    failed = [line for line in lines if line.startswith("FAIL")]
    assert failed and all(" east" in line for line in failed), "\n".join(lines)
    assert any(line.startswith("FAIL trace  egress  east: east-w1-p1 -> west pod") for line in failed), "\n".join(lines)
    assert any(line.startswith("FAIL packet pods    east-w1-p1 -> west") for line in failed), "\n".join(lines)
    assert "FAILED" in lines[-1]


def test_down_leaves_nothing(lab: LabState, magw_cli: MagwCli) -> None:
    """Every OVS and OVN process the lab started (per cluster NB, SB, northd; per node ovsdb-server,
    ovs-vswitchd, ovn-controller) is recorded, and after ``down`` none of them, nor any other process naming the
    lab's state directory, is left, and the directory is gone."""
    kinds = [p.kind for p in lab.processes]
    n_nodes, n_clusters = len(layout(lab.name, lab.topology).nodes), len(lab.topology.clusters)
    for kind in ("ovs-db", "ovs-vswitchd", "ovn-controller"):
        assert kinds.count(kind) == n_nodes, (kind, kinds)
    for kind in ("ovsdb-nb", "ovsdb-sb", "ovn-northd"):
        assert kinds.count(kind) == n_clusters, (kind, kinds)
    assert (lab.dir / "ovn").is_dir() and (lab.dir / "ovs").is_dir()
    out = magw_cli("lab", "down", "--name", lab.name)
    assert out.returncode == 0, out.stderr
    assert leftovers(lab.name, lab.processes) == NOTHING_LEFT
    holders = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, str(lab.dir))]
    assert holders == []
    assert not lab.dir.exists()


def _mentions(proc: Path, text: str) -> bool:
    try:
        return text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
