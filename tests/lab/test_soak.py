"""The soak (benchmarks/soak.py) for two minutes, and its judges on made-up figures.

The kernel test runs the benchmark as a user does, on its own uniquely named lab (three clusters, Globalnet, the
egress gateway with keepalived and conntrackd: ``examples/lab-soak.yaml``), with a fixed seed and VXLAN cables
(the example's WireGuard runs wireguard-go in userspace here, whose delays on a loaded machine make the probes
call live gateways down: docs/cables.md, "Known limits"; the 30-minute soak in docs/robustness.md runs WireGuard),
and requires exit 0 and a JSON report in which every fault window ran traffic in every group, converged, and broke
no invariant. The benchmark removes its lab in ``finally``; the test checks that nothing of it is left.

The judges are tested without root: a group that did not cross a fault and lost one datagram, a crossed group
whose flow never came back or whose window is over the bound, a broken TCP connection, a global IP held twice
and a status left of a deleted object are each reported.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from benchmarks import soak, soak_faults, soak_kernel, soak_report, soak_view, soak_watch
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.ovn_nodes import ovs_missing
from magw.lab.planes.ovn_servers import ovn_missing
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import load_topology
from tests.support.labkit import unique_name
from tests.support.netns import NsFactory, run
from tests.support.paths import REPO as ROOT

MINUTES = 2.0


def _udp(lost: int = 0, tail: int = 0, window: float = 0.0) -> dict[str, Any]:
    flow = {"sport": 41000, "sent": 100, "received": 100 - lost, "lost": lost, "lost_tail": tail,
            "windows_ms": [window] if lost else [], "window_starts_s": [1.0] if lost else []}  # fmt: skip
    return {"sent": 100, "scheduled": 100, "flows": [flow]}


def _tcp(broken: int = 0) -> dict[str, Any]:
    return {"conns": 2, "established": 2, "survived": 2 - broken, "max_gap_ms": 40.0}


def _fault(touches: set[str]) -> soak_faults.Fault:
    return soak_faults.Fault("power-loss", "east-gw1", frozenset(touches), lambda: "", lambda: "", 1.0, True)


GROUP = soak_watch.Group("east>west", "ns", "242.2.0.5:8080", frozenset({"east", "west"}))
OTHER = soak_watch.Group("west>north", "ns", "242.3.0.3:8080", frozenset({"west", "north"}))


@attrs.frozen
class _Gone:
    kept: Path | None


def test_a_soak_that_ends_early_keeps_the_labs_logs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A soak whose lab fails (or whose windows violate an invariant) removes the lab but copies its logs and status
    files first (``lifecycle.down(keep=...)``) and says where: the route agents' health events are the evidence."""
    calls: list[Path | None] = []

    def up(*_a: Any, **_kw: Any) -> None:
        raise RuntimeError("up failed on purpose")

    def down(name: str, *, keep: Path | None = None) -> _Gone:
        calls.append(keep)
        return _Gone(kept=keep)

    monkeypatch.setattr(soak.build, "up", up)
    monkeypatch.setattr(soak.build, "down", down)
    said: list[str] = []
    with pytest.raises(RuntimeError, match="up failed on purpose"):
        soak.soak(0.1, 1, "skkeep", report=said.append)
    assert len(calls) == 1 and calls[0] is not None and "skkeep" in calls[0].name, calls
    assert said == [f"the lab's logs and status files are kept in {calls[0]}"]


def test_prime_runs_the_first_windows_own_flows_and_reports_their_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """On OVN the first window's flows are started ahead of it (a new connection's first requests can be lost in the
    lab's userspace datapath: docs/ovn.md): ``prime`` sends from exactly the ports the window will use, counts what
    each group lost, and names a flow that lost more than half as dark."""
    started: list[tuple[str, int, int]] = []

    def udp(group: soak_watch.Group, duration: float, flows: int, rate: int, base: int, drain: float) -> str:
        started.append((group.name, flows, base))
        return group.name

    answers = {GROUP.name: {"udp": _udp(lost=2, window=40.0)},
               OTHER.name: {"udp": {"sent": 100, "flows": [{"sport": 41000, "sent": 20, "lost": 11}]}}}  # fmt: skip
    monkeypatch.setattr(soak_watch, "_udp", udp)
    monkeypatch.setattr(soak_watch, "collect", lambda running, _t: answers[running["udp"]])
    lost, dark = soak_watch.prime([GROUP, OTHER], soak.FLOWS, soak_watch.BASE_PORT)
    assert started == [(GROUP.name, soak.FLOWS, 41000), (OTHER.name, soak.FLOWS, 41000)]
    assert lost == {GROUP.name: 2, OTHER.name: 11}
    assert dark == [f"{OTHER.name}:41000"]


def test_judge_untouched_group_must_lose_nothing() -> None:
    fault = _fault({"east"})
    assert soak.judge(fault, OTHER, {"udp": _udp(), "tcp": _tcp()}, 3.0)[1] == []
    _fig, bad = soak.judge(fault, OTHER, {"udp": _udp(lost=1, window=20.0), "tcp": _tcp()}, 3.0)
    assert len(bad) == 1 and "did not cross the fault but lost 1 datagrams" in bad[0]
    assert f"at {1.0 - soak.PRE:+.2f} s from the injection, hold 1 s" in bad[0]  # the loss began 1 s into traffic
    _fig, bad = soak.judge(fault, OTHER, {"udp": _udp(), "tcp": _tcp(broken=1)}, 3.0)
    assert len(bad) == 1 and "1/2 TCP connections broke" in bad[0]


def test_judge_crossed_group_must_come_back_within_the_bound() -> None:
    fault = _fault({"east"})
    figures, bad = soak.judge(fault, GROUP, {"udp": _udp(lost=10, window=400.0), "tcp": _tcp()}, 3.0)
    assert bad == [] and figures["crossed"] and figures["lost"] == 10 and figures["window_ms"] == 400.0
    _f, bad = soak.judge(fault, GROUP, {"udp": _udp(lost=10, window=3500.0), "tcp": _tcp()}, 3.0)
    assert len(bad) == 1 and "loss window 3500 ms > bound 3000 ms" in bad[0]
    _f, bad = soak.judge(fault, GROUP, {"udp": _udp(lost=10, tail=10, window=200.0), "tcp": _tcp()}, 3.0)
    assert len(bad) == 1 and "did not come back" in bad[0]
    _f, bad = soak.judge(fault, GROUP, {"udp": {"error": "exit 1"}, "tcp": _tcp()}, 3.0)
    assert len(bad) == 1 and "traffic tool failed" in bad[0]


def test_judge_says_why_a_crossed_groups_tcp_connections_broke() -> None:
    """Counted, not judged; but the figures keep each distinct first error of the broken ones."""
    tcp = _tcp(broken=2) | {"connections": [
        {"conn": 0, "survived": False, "error": "recv: [Errno 104] Connection reset by peer"},
        {"conn": 1, "survived": False, "error": "recv: [Errno 104] Connection reset by peer"},
        {"conn": 2, "survived": True, "error": None},
    ]}  # fmt: skip
    figures, bad = soak.judge(_fault({"east"}), GROUP, {"udp": _udp(), "tcp": tcp}, 3.0)
    assert bad == [] and figures["tcp_survived"] == 0
    assert figures["tcp_errors"] == ["recv: [Errno 104] Connection reset by peer"]
    assert soak.judge(_fault({"east"}), GROUP, {"udp": _udp(), "tcp": _tcp()}, 3.0)[0]["tcp_errors"] == []


def test_judge_an_egress_group_that_left_as_another_address() -> None:
    """The egress group's server must see the VIP on every surviving connection (the soak lab once bound no Service
    to its egress pod: it left as its node, and no window noticed)."""
    egress = soak_watch.Group("egress", "ns", "172.17.0.250:8080", frozenset({"egress"}), seen="172.17.0.200")
    conns = [{"conn": 0, "survived": True, "seen_ip": "172.17.0.200"},
             {"conn": 1, "survived": False, "seen_ip": "172.17.0.11"}]  # fmt: skip
    assert soak.judge(_fault({"west"}), egress, {"udp": _udp(), "tcp": _tcp() | {"connections": conns}}, 3.0)[1] == []
    conns[0]["seen_ip"] = "172.17.0.101"
    _f, bad = soak.judge(_fault({"west"}), egress, {"udp": _udp(), "tcp": _tcp() | {"connections": conns}}, 3.0)
    assert bad == ["egress: the server saw 172.17.0.101, not 172.17.0.200"]


def test_a_row_shows_where_a_dark_flow_left_state() -> None:
    """A flow that did not come back: the row prints the conntrack entries found for it (a CI failure says why)."""
    row = {"kind": "gateway-remove", "target": "west-gw1", "detection_s": None, "converged_s": 15.8,
           "crossed_lost": 620, "crossed_window_ms": 12399.0, "untouched_lost": 0, "problems": ["east>west: x"],
           "groups": [{"group": "east>west", "dark_conntrack": ["west-gw2: udp 17 115 src=100.0.0.10"]},
                      {"group": "ingress"}]}  # fmt: skip
    lines = soak_report.row_text(1, row).splitlines()
    assert len(lines) == 2 and "VIOLATED: east>west: x" in lines[0]
    assert lines[1].split() == ["east>west:", "a", "flow", "that", "did", "not", "come", "back:", "west-gw2:", "udp",
                                "17", "115", "src=100.0.0.10"]  # fmt: skip


def test_a_row_names_the_drop_counters_that_moved_where_an_untouched_group_lost() -> None:
    """An untouched group that lost datagrams: the row prints the drop counters that grew on its clusters' nodes
    (benchmarks/soak_drops.py), one line per node."""
    row = {"kind": "gateway-add", "target": "west-gw3", "detection_s": None, "converged_s": 15.0, "crossed_lost": 101,
           "crossed_window_ms": 338.0, "untouched_lost": 4, "problems": ["egress: did not cross the fault but lost 4"],
           "groups": [{"group": "egress", "drops_moved": ["east-gw2: Ip.OutNoRoutes +2", "east-w1: Udp.NoPorts +1"]},
                      {"group": "east>west"}]}  # fmt: skip
    lines = soak_report.row_text(1, row).splitlines()
    assert len(lines) == 3 and "VIOLATED: egress: did not cross the fault but lost 4" in lines[0]
    assert [line.strip() for line in lines[1:]] == [
        "egress: drop counters that moved in the window: east-gw2: Ip.OutNoRoutes +2",
        "egress: drop counters that moved in the window: east-w1: Udp.NoPorts +1",
    ]


@pytest.mark.kernel
def test_conntrack_evidence_reads_the_entries_of_the_given_ports(ns_factory: NsFactory) -> None:
    """Entries of the given source ports, either direction, by node; others left out."""
    ns = ns_factory("magwt-ctev")
    run(ns, "ip", "link", "set", "lo", "up")
    run(ns, "nft", "add table ip t; add chain ip t c { type filter hook output priority 0; ct state new accept; }")
    send = ("import socket\nfor p in (41001, 41002):\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "    s.bind(('127.0.0.1', p)); s.sendto(b'x', ('127.0.0.1', 9))")  # fmt: skip
    run(ns, sys.executable, "-c", send)
    got = soak_kernel.conntrack_evidence({"west-gw2": ns}, [41001])
    assert len(got) == 1 and got[0].startswith("west-gw2: udp ") and "sport=41001 dport=9 " in got[0], got


def _write(directory: Path, file: str, doc: dict[str, Any]) -> None:
    (directory / file).write_text(yaml.safe_dump(doc, sort_keys=False))


def _ingress(directory: Path, name: str, ip: str) -> None:
    _write(directory, f"globalingressip@east@default@{name}.yaml", {
        "kind": "GlobalIngressIP", "cluster": "east", "namespace": "default", "name": name,
        "target": "ClusterIPService", "serviceName": name,
        "targetRef": {"kind": "Service", "name": name, "namespace": "default"}, "targetIP": "100.0.0.10"})
    _write(directory, f"globalnet-status@east@GlobalIngressIP@default@{name}.yaml", {
        "kind": "GlobalnetStatus", "cluster": "east",
        "object": {"kind": "GlobalIngressIP", "name": name, "namespace": "default"}, "allocatedIP": ip})


def test_globalnet_problems_duplicates_outside_and_leaked(tmp_path: Path) -> None:
    """Objects and statuses written as the controller writes them, read back through the file broker."""
    _write(tmp_path, "cluster-east.yaml", {"kind": "Cluster", "id": "east", "pod_cidrs": ["10.0.0.0/16"],
                                           "service_cidrs": ["100.0.0.0/16"], "global_cidrs": ["242.1.0.0/16"]})
    _ingress(tmp_path, "svc-a", "242.1.0.5")
    snapshots = soak_view.file_snapshots(tmp_path)
    assert soak_watch.globalnet_problems(snapshots, ["east"]) == []
    _ingress(tmp_path, "svc-b", "242.1.0.5")
    assert soak_watch.globalnet_problems(snapshots, ["east"]) == [
        "east: 242.1.0.5 held by ['GlobalIngressIP/svc-a', 'GlobalIngressIP/svc-b']"
    ]
    _ingress(tmp_path, "svc-b", "242.9.0.1")
    _ingress(tmp_path, "soak-1", "242.1.0.6")
    assert sorted(soak_watch.globalnet_problems(snapshots, ["east"])) == [
        "east: GlobalIngressIP/svc-b holds 242.9.0.1 outside ['242.1.0.0/16']",
        "east: leaked status of deleted GlobalIngressIP default/soak-1",
    ]


def test_schedule_draws_only_the_kinds_asked_for(tmp_path: Path) -> None:
    lab = layout("skunit", load_topology(soak.TOPOLOGY))
    added = soak_faults.schedule(lab, tmp_path, random.Random(1), 6, frozenset({"gateway-add"}))
    # the name the next gateway of its cluster gets: after examples/lab-soak.yaml's two or one
    assert {f.target for f in added} <= {"east-gw3", "west-gw3", "north-gw2"}
    assert all(f.touches == {f.target.split("-")[0]} and f.outage for f in added)
    faults = soak_faults.schedule(lab, tmp_path, random.Random(1), 6, frozenset({"gateway-remove"}))
    assert [f.kind for f in faults] == ["gateway-remove"] * 6
    gateways = [n for n in lab.nodes if n.gateway]
    multi = {n.name for n in gateways if sum(g.cluster == n.cluster for g in gateways) > 1}
    assert {f.target for f in faults} <= multi and all(f.touches == {lab.node(f.target).cluster} for f in faults)
    (tmp_path / "node-east-w1.yaml").write_text("")  # the broker faults pick a document to break
    every = soak_faults.schedule(lab, tmp_path, random.Random(1), len(soak_faults.FILE_KINDS))
    assert sorted(f.kind for f in every) == list(soak_faults.FILE_KINDS)
    with pytest.raises(ValueError, match="fault kinds: nope unknown on a file lab; known: broker-garbage"):
        soak_faults.schedule(lab, tmp_path, random.Random(1), 1, frozenset({"nope"}))
    with pytest.raises(ValueError, match="fault kinds: kill-apiserver unknown on a file lab"):
        soak_faults.schedule(lab, tmp_path, random.Random(1), 1, frozenset({"kill-apiserver"}))


def test_the_heal_leaves_post_seconds_of_traffic_however_long_the_inject_took() -> None:
    """A gateway-add whose inject took 6.1 s heals 4 s + the rest of its lead later (traffic after the heal stays
    POST); a fault without a lead keeps its plain hold, whatever its inject took (gateway-remove's waits 3 s)."""
    noop = lambda: ""  # noqa: E731
    add = soak_faults.Fault("gateway-add", "north-gw2", frozenset({"north"}), noop, noop, hold=4.0, outage=True,
                            lead=soak_faults.ADD_LEAD)  # fmt: skip
    assert soak.heal_wait(add, 6.1) == pytest.approx(soak_faults.ADD_LEAD + 4.0 - 6.1)
    assert soak.heal_wait(add, soak_faults.ADD_LEAD + 9.0) == 4.0  # past its lead: the hold at least
    plain = attrs.evolve(add, kind="gateway-remove", lead=0.0)
    assert soak.heal_wait(plain, 2.5) == 4.0


def test_kube_schedule_has_the_control_plane_kinds_and_no_broker_file_one(tmp_path: Path) -> None:
    """A kube lab's soak: no broker files; its API servers (every cluster's and the broker's) killed, 410-stormed
    and their watches dropped, each touching no flow (every group must lose nothing); a gateway removed by its
    label, touching its cluster."""
    lab = layout("skunit", load_topology(soak.TOPOLOGY))
    every = soak_faults.schedule(lab, tmp_path, random.Random(2), 3 * len(soak_faults.KUBE_KINDS), control_plane="kube")
    assert sorted({f.kind for f in every}) == list(soak_faults.KUBE_KINDS)
    api = [f for f in every if f.kind in ("kill-apiserver", "watch-410", "watch-drop")]
    assert {f.target for f in api} <= {"east", "west", "north", "broker"} and len({f.target for f in api}) > 1
    assert all(f.touches == frozenset() and not f.outage for f in api)
    assert next(f.hold for f in api if f.kind == "kill-apiserver") > 0
    assert {"kill-egress", "kill-egress-agent", "kill-keepalived", "kill-conntrackd"} <= {f.kind for f in every}
    removed = [f for f in every if f.kind == "gateway-remove"]
    assert removed and all(f.touches == {lab.node(f.target).cluster} and f.outage for f in removed)
    for kind in ("broker-garbage", "broker-truncate"):
        with pytest.raises(ValueError, match=f"fault kinds: {kind} unknown on a kube lab"):
            soak_faults.schedule(lab, tmp_path, random.Random(1), 1, frozenset({kind}), control_plane="kube")


def test_ovn_schedule_has_ovns_processes_and_the_egress_kinds(tmp_path: Path) -> None:
    """An OVN lab's soak: ovn-controller (per node), ovn-northd and both ovsdb-servers (per cluster) are killed, each
    touching no flow (Open vSwitch keeps forwarding); the egress gateway's kinds are drawn as on the generic CNI (the
    egress gateway runs on OVN too), and gateway-add (the new node becomes an OVN node: magw.lab.planes.ovn_grow)."""
    topo = load_topology(soak.TOPOLOGY)
    lab = layout("skunit", topo)
    (tmp_path / "node-east-w1.yaml").write_text("")
    every = soak_faults.schedule(lab, tmp_path, random.Random(3), 3 * len(soak_faults.OVN_KINDS), cni="ovn")
    kinds = {f.kind for f in every}
    assert sorted(kinds) == list(soak_faults.OVN_KINDS) and set(soak_faults.EGRESS_KINDS) <= kinds
    assert "gateway-add" in kinds
    ovn = [f for f in every if f.kind in soak_faults.OVN_PROCESS_KINDS]
    clusters, nodes = {c.id for c in topo.clusters}, {n.name for n in lab.nodes}
    assert all(f.touches == frozenset() and not f.outage for f in ovn)
    assert {f.target for f in ovn if f.kind == "kill-ovn-controller"} <= nodes
    assert {f.target for f in ovn if f.kind != "kill-ovn-controller"} <= clusters
    with pytest.raises(ValueError, match="fault kinds: kill-apiserver unknown on a file lab with --cni ovn"):
        soak_faults.schedule(lab, tmp_path, random.Random(1), 1, frozenset({"kill-apiserver"}), cni="ovn")


def test_ovn_schedule_on_the_kube_control_plane_has_the_api_servers_faults_too(tmp_path: Path) -> None:
    """``--cni ovn --control-plane kube``: the kube kinds (the API servers' own faults, the egress ones and gateway-add
    among them) and OVN's processes; the broker file kinds are unknown there."""
    lab = layout("skunit", load_topology(soak.TOPOLOGY))
    known = soak_faults.kinds_of("kube", "ovn")
    assert {"kill-apiserver", "watch-410", "watch-drop", *soak_faults.OVN_PROCESS_KINDS} <= set(known)
    assert set(soak_faults.EGRESS_KINDS) <= set(known)
    assert not set(known) & {"broker-garbage", "broker-truncate"} and "gateway-add" in known
    every = soak_faults.schedule(lab, tmp_path, random.Random(5), 2 * len(known), control_plane="kube", cni="ovn")
    assert sorted({f.kind for f in every}) == list(known)
    with pytest.raises(ValueError, match="fault kinds: broker-garbage unknown on a kube lab with --cni ovn"):
        soak_faults.schedule(lab, tmp_path, random.Random(1), 1, frozenset({"broker-garbage"}), control_plane="kube",
                             cni="ovn")  # fmt: skip


def _run_soak(tmp_path: Path, name: str, *args: str) -> dict[str, Any]:
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--cable", "vxlan", "--name", name,
         "--json", str(out), *args],
        capture_output=True, text=True, timeout=540, cwd=ROOT,
    )  # fmt: skip
    print(done.stdout[-6000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    doc: dict[str, Any] = json.loads(out.read_text())
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"{name}-" not in left
    return doc


@pytest.mark.kernel
@pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)")
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("plane", "cni"), [("file", "generic"), ("kube", "generic"), ("file", "ovn")])
def test_soak_a_new_gateway_node_joins_and_leaves(tmp_path: Path, plane: str, cni: str) -> None:
    """``--kinds gateway-add``: a new node joins a cluster as a gateway (``magw lab add-gateway``: its Node published,
    on Kubernetes with the gateway label; its daemons started; probed as up by every worker of its cluster and every
    remote gateway), carries its share for the hold and leaves (``remove-gateway``); flows that did not cross its
    cluster lose nothing, the others come back, and every node's kernel converges to its plan without it. On OVN the
    node is an OVN node too (its Open vSwitch and ovn-controller, its NB rows: magw.lab.planes.ovn_grow), and the
    syncers must be in sync with it and without it."""
    doc = _run_soak(tmp_path, unique_name(), "--minutes", "0.4" if plane == "file" else "0.7", "--seed", "7",
                    "--kinds", "gateway-add", "--control-plane", plane, "--cni", cni)  # fmt: skip
    rows = doc["faults"]
    assert rows and doc["kinds"] == ["gateway-add"] and (doc["control_plane"], doc["cni"]) == (plane, cni)
    # its route agent and gateway daemon (and in the egress cluster its egress agent) stopped; on OVN also its
    # ovsdb-server, ovs-vswitchd and ovn-controller, and its NB rows and SB chassis deleted
    stopped = "[56] daemons stopped" if cni == "ovn" else "[23] daemons stopped"
    for r in rows:
        assert r["kind"] == "gateway-add" and "probed as up everywhere after" in r["injected"], r
        assert re.search(rf"removed: {r['target']}: {stopped}; .* namespace \S+ deleted", r["healed"]), r
        assert cni != "ovn" or "its NB rows and SB chassis deleted" in r["healed"], r
        assert r["problems"] == [] and r["converged_s"] is not None, r
        assert any(g["crossed"] for g in r["groups"]), r
        for g in r["groups"]:
            if not g["crossed"]:
                assert g["lost"] == 0 and g["tcp_survived"] == g["tcp_conns"], (r["kind"], g)


@pytest.mark.kernel
@pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("plane", ["file", "kube"])
def test_soak_a_gateway_removed_and_added_back(tmp_path: Path, plane: str) -> None:
    """``--kinds gateway-remove``: a gateway stops being one (daemon gone, Endpoint withdrawn; on Kubernetes its
    Node's gateway label removed too, and put back at the heal) and comes back; flows that did not cross it lose
    nothing, the others come back, and every node's kernel converges to its plan (the removed gateway's as a
    worker's while it is out is not checked: the soak judges after the heal)."""
    doc = _run_soak(tmp_path, unique_name(), "--minutes", "0.4" if plane == "file" else "0.7", "--seed", "7",
                    "--kinds", "gateway-remove", "--control-plane", plane)  # fmt: skip
    rows = doc["faults"]
    assert rows and doc["kinds"] == ["gateway-remove"] and doc["control_plane"] == plane
    for r in rows:
        assert r["kind"] == "gateway-remove" and "Endpoint withdrawn" in r["injected"], r
        if plane == "kube":
            assert "label submariner.io/gateway removed" in r["injected"] and "label" in r["healed"], r
        assert "out of every route agent's peers after" in r["injected"], r
        assert r["problems"] == [] and r["converged_s"] is not None, r
        assert any(g["crossed"] for g in r["groups"]), r
        for g in r["groups"]:
            if not g["crossed"]:
                assert g["lost"] == 0 and g["tcp_survived"] == g["tcp_conns"], (r["kind"], g)


@pytest.mark.kernel
@pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)")
@pytest.mark.timeout(600)
def test_soak_two_minutes(tmp_path: Path) -> None:
    # The kinds there were when seed 30 was chosen: the same schedule (a GlobalEgressIP blip, a Globalnet
    # controller kill, a gateway daemon kill) whatever kinds are added; gateway-remove and gateway-add, which came
    # later, have their own tests above.
    before = ",".join(k for k in soak_faults.FILE_KINDS if k not in ("gateway-remove", "gateway-add"))
    doc = _run_soak(tmp_path, unique_name(), "--minutes", str(MINUTES), "--seed", "30", "--kinds", before)
    rows = doc["faults"]
    assert len(rows) >= 2, f"only {len(rows)} fault windows in {MINUTES} minutes"
    assert len({r["kind"] for r in rows}) == len(rows), "the schedule repeated a kind before using every kind"
    for r in rows:
        assert r["problems"] == [] and r["converged_s"] is not None, r
        assert {g["group"] for g in r["groups"]} == {"east>west", "west>north", "north>east", "egress", "ingress"}
        for g in r["groups"]:
            assert g["sent"] > 0 and g["tcp_conns"] == soak.CONNS, g
            if not g["crossed"]:
                assert g["lost"] == 0 and g["tcp_survived"] == g["tcp_conns"], (r["kind"], g)
    assert doc["resources"], "no daemon's resources were sampled twice"


@pytest.mark.kernel
@pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)")
@pytest.mark.timeout(600)
def test_soak_kube_control_plane_faults(tmp_path: Path) -> None:
    """``--control-plane kube`` with the API servers' own kinds (seed 5: an API server SIGKILLed and restarted over
    its state file, then a 410 storm, then dropped watches): nothing in the data plane waits for the control plane,
    so no group, through the egress VIP included, loses a datagram or a TCP connection, and every node converges to
    the plan of its cluster as its API server now holds it. Before the reflector stopped building a client per
    watch, the 410 storm and dropped watches stalled the daemons' loops past the liveness lease: peers were called
    down and TCP connections broke."""
    kinds = ("kill-apiserver", "watch-410", "watch-drop")
    doc = _run_soak(tmp_path, unique_name(), "--control-plane", "kube", "--minutes", "2", "--seed", "5",
                    "--kinds", ",".join(kinds))  # fmt: skip
    rows = doc["faults"]
    assert doc["control_plane"] == "kube" and len(rows) >= 2, rows
    assert rows[0]["kind"] == "kill-apiserver" and "answering after" in rows[0]["healed"], rows[0]
    assert len({r["kind"] for r in rows}) == min(len(rows), len(kinds))
    for r in rows:
        assert r["problems"] == [] and r["converged_s"] is not None, r
        assert {g["group"] for g in r["groups"]} == {"east>west", "west>north", "north>east", "egress", "ingress"}
        for g in r["groups"]:
            assert not g["crossed"] and g["sent"] > 0, g
            assert g["lost"] == 0 and g["tcp_survived"] == g["tcp_conns"] == soak.CONNS, (r["kind"], g)


@pytest.mark.kernel
@pytest.mark.ovn
@pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)")
@pytest.mark.timeout(600)
def test_soak_on_ovn_kills_ovns_processes_and_nothing_is_lost(tmp_path: Path) -> None:
    """``--cni ovn``: the soak lab on OVN-Kubernetes with real packets (Globalnet, two gateways in east and west, the
    egress gateway's groups through VIP shop);
    ovn-controller, ovn-northd and the NB and SB ovsdb-servers SIGKILLed and restarted: no group loses anything,
    every TCP connection survives, and every node's kernel and every cluster's OVN syncer converge. The warm-up's
    first round, the first flows through the new gateway routers, passes: none of them stays dark (docs/ovn.md,
    "A new gateway router's first flows")."""
    reason = ovn_missing() or ovs_missing()
    if reason:
        pytest.skip(reason)
    doc = _run_soak(tmp_path, unique_name(), "--cni", "ovn", "--minutes", "3.2", "--seed", "1",
                    "--kinds", ",".join(soak_faults.OVN_PROCESS_KINDS))  # fmt: skip
    rows = doc["faults"]
    assert doc["cni"] == "ovn" and doc["warm_up_s"] is not None
    assert doc["warm_up_rounds"] == 1, doc["warm_up_s"]
    assert set(doc["primed_lost"]) == {"east>west", "west>north", "north>east", "egress", "ingress"}, doc
    assert {r["kind"] for r in rows} == set(soak_faults.OVN_PROCESS_KINDS), [r["kind"] for r in rows]
    for r in rows:
        assert r["problems"] == [] and r["converged_s"] is not None, r
        assert {g["group"] for g in r["groups"]} == {"east>west", "west>north", "north>east", "egress", "ingress"}
        for g in r["groups"]:
            assert g["sent"] > 0 and g["lost"] == 0 and g["tcp_survived"] == g["tcp_conns"], (r["kind"], g)
