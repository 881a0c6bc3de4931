"""Without a kernel: what ``up --control-plane kube`` writes says what the file broker's documents say.

The lab's objects (``magw.lab.planes.kube_objects``) are created through HTTP (``magw.lab.planes.kube_http``) in real
emulator processes (``python -m magw.kubeemu``, one per cluster, stopped by PID); the route agents' CNI
annotations and the broker sync's remote Cluster objects are added as those daemons would; then the lab's
reader (``magw.lab.observe.kube_view``) must build, for every cluster, the very snapshot ``FileBroker`` builds from
the file-broker documents of the same lab. Also: the daemons' own parsers accept the kube-mode command lines,
and the state file keeps the control plane.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from magw.daemons.egressgw import main as egress_daemon
from magw.daemons.egressgw_agent import main as egress_agent
from magw.daemons.gateway import main as gateway
from magw.daemons.globalnet import main as globalnet_daemon
from magw.daemons.route_agent import main as route_agent
from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.observe.kube_view import cluster_snapshot
from magw.lab.planes import egressgw_daemons, kube
from magw.lab.planes.daemons import gateway_argv, globalnet_argv, route_agent_argv, write_broker
from magw.lab.planes.kube_objects import cluster_object, cluster_objects, config_objects, node_object
from magw.lab.scenarios.globalnet_demo import demo_topology
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, layout
from magw.lab.spec.topology import Topology, default_topology, load_topology
from magw.sources.file.broker import FileBroker
from magw.sources.kube import mapping
from magw.sources.kube.client import write_kubeconfig
from tests.support.cli import MagwCli
from tests.support.paths import REPO

MERGE = "application/merge-patch+json"
EXAMPLES = REPO / "examples"


@contextlib.contextmanager
def kube_lab(topo: Topology, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LabLayout, LabState]]:
    """A kube lab's state (under a short temporary STATE_ROOT: socket paths must fit in 108 bytes) with an
    emulator process per cluster and the broker's; every process stopped by PID, the directory removed."""
    root = Path(tempfile.mkdtemp(prefix="lk-"))
    monkeypatch.setattr(naming, "STATE_ROOT", root)
    st = LabState(name="lk", topology=topo, phase="up", daemons=True, token="0" * 16, control_plane="kube")
    st.kube_dir.mkdir(parents=True)
    running: list[subprocess.Popen[bytes]] = []
    try:
        for api in kube.api_servers(st):
            running.append(subprocess.Popen(kube.emulator_argv(api), stderr=subprocess.DEVNULL))
            write_kubeconfig(api.kubeconfig, f"unix://{api.socket}", api.namespace)
        deadline = time.monotonic() + 20
        while not all(a.pidfile.exists() for a in kube.api_servers(st)):
            assert time.monotonic() < deadline, "the emulators did not start"
            time.sleep(0.05)
        yield layout("lk", topo), st
    finally:
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def load_as_the_daemons_would(lab: LabLayout, st: LabState) -> None:
    """``up``'s objects, then what the daemons add: each Node's CNI annotation (its route agent) and the other
    clusters' Cluster objects (the gateways' broker sync)."""
    for c in lab.clusters:
        http = kube.cluster_api(st, c.id).http()
        for obj in cluster_objects(lab, c):
            http.create(obj)
        for n in c.nodes:
            body = {"metadata": {"annotations": {mapping.CNI_IP_ANNOTATION: str(n.cni_ip)}}}
            http.request("PATCH", f"/api/v1/nodes/{n.name}", body, content_type=MERGE)
        for other in lab.clusters:
            if other.id != c.id:
                http.create(cluster_object(other))


TOPOLOGIES = [default_topology(), demo_topology(), load_topology(EXAMPLES / "lab-egress-gateway.yaml"),
              load_topology(EXAMPLES / "lab-soak.yaml")]  # fmt: skip


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=["default", "globalnet", "egress", "globalnet-egress"])
def test_each_clusters_objects_give_the_file_brokers_snapshot(topo: Topology, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also with the egress gateway: the egress cluster's EgressConfig, EgressVIPs and workloads (without Globalnet
    too) as its route agents read them with ``--egress``."""
    with kube_lab(topo, monkeypatch) as (lab, st):
        load_as_the_daemons_would(lab, st)
        write_broker(lab, st.broker_dir)
        for c in lab.clusters:
            broker = FileBroker(st.broker_dir, local_cluster=c.id)
            broker.scan()
            assert broker.snapshot is not None
            assert cluster_snapshot(st, c.id) == broker.snapshot, c.id
        if topo.egressgw is not None:
            eg = cluster_snapshot(st, topo.egressgw.cluster)
            assert eg is not None and [v.name for v in eg.egressgw.vips] == [v.name for v in topo.egressgw.vips]
            assert eg.egressgw.config.vip_ranges
        if topo.globalnet and topo.egressgw is None:
            gn = cluster_snapshot(st, "east")
            assert gn is not None and [p.name for p in gn.globalnet.pods if p.namespace == "shop"] == [
                "batch-1",
                "db-0",
                "web-0",
            ]


def test_a_cluster_api_server_holds_only_its_own_cluster_and_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the broker sync: east's own Cluster and Nodes, gateways labelled and with their public IP, no CNI
    annotation (the route agents write it), so no Node maps yet: the snapshot has east alone and no node."""
    with kube_lab(default_topology(), monkeypatch) as (lab, st):
        for c in lab.clusters:
            for obj in cluster_objects(lab, c):
                kube.cluster_api(st, c.id).http().create(obj)
        http = kube.cluster_api(st, "east").http()
        assert [o["metadata"]["name"] for o in http.list("Cluster", "submariner-operator")] == ["east"]
        nodes = {o["metadata"]["name"]: o["metadata"] for o in http.list("Node")}
        assert sorted(nodes) == ["east-gw1", "east-gw2", "east-w1", "east-w2"]
        assert nodes["east-gw1"]["labels"] == {mapping.GATEWAY_LABEL: "true"}
        assert nodes["east-gw1"]["annotations"] == {mapping.PUBLIC_IP_ANNOTATION: "ipv4:198.18.0.11"}
        assert "annotations" not in nodes["east-w1"] and "labels" not in nodes["east-w1"]
        specs = {o["metadata"]["name"]: o["spec"] for o in http.list("Node")}
        subnet = str(lab.node("east-w1").pod_subnet)
        assert specs["east-w1"] == {"podCIDR": subnet, "podCIDRs": [subnet]}  # the node's pod subnet
        snap = cluster_snapshot(st, "east")
        assert snap is not None and ([c.id for c in snap.clusters], snap.nodes) == (["east"], ())
        assert kube.broker_api(st).http().list("Endpoint") == []


def test_each_node_object_carries_its_pod_subnet() -> None:
    """``spec.podCIDRs`` (and ``podCIDR``, its first entry, as a node IPAM writes them): the node's pod subnet, which
    the Kubernetes source maps to the Node's ``pod_cidrs`` once its route agent wrote the CNI annotation."""
    lab = layout("lk", default_topology())
    for n in (n for c in lab.clusters for n in c.nodes):
        obj = node_object(n)
        assert obj["spec"] == {"podCIDR": str(n.pod_subnet), "podCIDRs": [str(n.pod_subnet)]}
        obj["metadata"].setdefault("annotations", {})[mapping.CNI_IP_ANNOTATION] = str(n.cni_ip)
        (doc,) = mapping.node_docs(obj, n.cluster)
        assert doc.fields["pod_cidrs"] == [str(n.pod_subnet)]


def _config_map(lab: LabLayout) -> dict[str, str]:
    (config_map,) = (o for o in config_objects(lab, lab.clusters[0]) if o["kind"] == "ConfigMap")
    data: dict[str, str] = config_map["data"]
    return data


@pytest.mark.parametrize("keep", [True, False])
def test_the_config_map_says_keep_client_ip_only_when_the_topology_turns_it_on(keep: bool) -> None:
    """``keepClientIP: "true"`` when on; off: no key (the Config's default), as the file broker's Config."""
    lab = layout("lk", attrs.evolve(default_topology(), keep_client_ip=keep))
    assert _config_map(lab).get("keepClientIP") == ("true" if keep else None)
    submariner, config_map = config_objects(lab, lab.clusters[0])
    (doc,) = mapping.config_docs(submariner, config_map)
    assert doc.fields.get("keep_client_ip", False) is keep
    assert ("keep_client_ip" in doc.fields) is keep


def test_the_daemons_accept_the_kube_command_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab's argv in kube mode parses with each daemon's own parser (a renamed flag would fail here)."""
    monkeypatch.setattr("magw.lab.planes.daemons.script", lambda name: Path("/bin") / name)
    with kube_lab(demo_topology(), monkeypatch) as (lab, st):
        gw, east = lab.node("east-gw1"), lab.cluster("east")
        args = route_agent.build_parser().parse_args(route_agent_argv(st, gw)[1:])
        assert (args.source, args.kubeconfig, args.cni_interface) == (
            "kube",
            str(kube.cluster_api(st, "east").kubeconfig),
            "cni0",
        )
        args = gateway.build_parser().parse_args(gateway_argv(st, gw)[1:])
        assert (args.broker_kubeconfig, args.broker_namespace) == (
            str(kube.broker_api(st).kubeconfig),
            "submariner-k8s-broker",
        )
        assert (args.identity, args.health_status_file) == (
            "east-gw1",
            str(st.dir / "status" / "route-agent-east-gw1.json"),
        )
        args = globalnet_daemon.parser().parse_args(globalnet_argv(st, east)[1:])
        assert (args.source, args.namespace, args.broker_dir) == ("kube", "submariner-operator", None)


def test_the_egress_daemons_accept_the_kube_command_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the egress gateway on a kube lab: its controller and agents on the cluster's API server (no broker
    directory), and the egress cluster's route agents with ``--egress`` (the other cluster's without)."""
    monkeypatch.setattr("magw.lab.planes.daemons.script", lambda name: Path("/bin") / name)
    with kube_lab(load_topology(EXAMPLES / "lab-egress-gateway.yaml"), monkeypatch) as (lab, st):
        kubeconfig = str(kube.cluster_api(st, "east").kubeconfig)
        script = lambda name: Path("/bin") / name  # noqa: E731
        egressgw_daemons.api_socket(st).parent.mkdir(parents=True)  # as start_controller makes it
        for n in lab.cluster("east").nodes:
            egressgw_daemons.agent_workdir(st, n).parent.mkdir(parents=True, exist_ok=True)
        args = egress_daemon.parser().parse_args(egressgw_daemons.controller_argv(lab, st, script)[1:])
        assert (args.source, args.kubeconfig, args.namespace, args.broker_dir) == (
            "kube", kubeconfig, "submariner-operator", None)
        agent = egressgw_daemons.agent_argv(st, lab.node("east-w1"), script)
        args = egress_agent.parser().parse_args(agent[1:])
        assert (args.source, args.kubeconfig, args.broker_dir) == ("kube", kubeconfig, None)
        for node, egress in (("east-w1", True), ("east-gw2", True), ("west-gw1", False)):
            args = route_agent.build_parser().parse_args(route_agent_argv(st, lab.node(node))[1:])
            assert args.egress is egress, node


def test_the_state_file_keeps_the_control_plane(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path)
    st = LabState(
        name="ks", topology=default_topology(), phase="up", daemons=True, token="1" * 16, control_plane="kube"
    )
    state.write(st)
    assert state.read("ks") == st
    doc = st.to_doc()
    del doc["control_plane"]  # a lab from before the kube control plane
    assert LabState.from_doc(doc, source="old").control_plane == "file"
    with pytest.raises(LabError, match="control_plane: 'etcd' is not one of file, kube"):
        LabState.from_doc({**doc, "control_plane": "etcd"}, source="bad")


@pytest.mark.parametrize("verb", ["up", "demo"])
def test_an_unknown_control_plane_is_bad_input(verb: str, magw_cli: MagwCli) -> None:
    out = magw_cli("lab", verb, "--name", "lkx", "--control-plane", "etcd", timeout=60)
    assert out.returncode == 2
    assert "--control-plane: invalid choice: 'etcd' (choose from 'file', 'kube')" in out.stderr
    assert not naming.state_dir("lkx").exists()


def test_an_ovn_labs_submariner_object_names_ovn_kubernetes_and_keeps_no_client_ip() -> None:
    """``--cni ovn --control-plane kube``: the Submariner object says ``networkPlugin: OVNKubernetes``, which the
    Kubernetes source maps to the Config's ``cni: ovn`` (the route agents' OVN mode); ``keepClientIP`` stays off
    on OVN (its routers balance services), as in the file broker's Config."""
    lab = layout("lk", attrs.evolve(default_topology(), keep_client_ip=True))
    submariner, config_map = config_objects(lab, lab.clusters[0], "ovn")
    assert submariner["spec"]["networkPlugin"] == "OVNKubernetes"
    assert "keepClientIP" not in config_map["data"]
    (doc,) = mapping.config_docs(submariner, config_map)
    assert doc.fields["cni"] == "ovn" and "keep_client_ip" not in doc.fields
    generic, _cm = config_objects(lab, lab.clusters[0])
    assert "networkPlugin" not in generic["spec"]
    (doc,) = mapping.config_docs(generic, _cm)
    assert "cni" not in doc.fields
    ovn_kinds = [o["kind"] for o in cluster_objects(lab, lab.clusters[0], "ovn")]
    assert ovn_kinds == [o["kind"] for o in cluster_objects(lab, lab.clusters[0])]
