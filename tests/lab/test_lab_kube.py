"""Kernel test: ``magw lab up --control-plane kube`` (docs/lab.md): the daemons fed by API server emulators.

The default two-cluster lab with one emulator per cluster and one for the broker. What the daemons wrote is
read with kubernetes-asyncio (the client the daemons use), through each emulator's kubeconfig, not through
the lab's own reader. One lab for the whole module, with a unique name, always removed; the failover test
fails a gateway, so it comes after the tests that need every gateway; the last test takes the lab down and
checks that nothing is left.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import CoordinationV1Api, CustomObjectsApi

from magw.lab.build import lifecycle as build
from magw.lab.build import procs, state
from magw.lab.build.state import LabState
from magw.lab.planes import kube
from magw.lab.planes.daemons import daemons_installed
from magw.lab.scenarios.failover import measure_failover
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import default_topology
from magw.lab.verify.matrix import run_matrix
from magw.sources.kube.client import api_client
from tests.support.cli import MagwCli
from tests.support.labkit import NOTHING_LEFT, leftovers, running_lab, unique_name

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

WAIT = 20.0


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    with running_lab(default_topology(), daemons=True, control_plane="kube") as built:
        yield built


def poll(what: str, condition: Callable[[], bool], limit: float = WAIT) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not reached within {limit:g} s")
        time.sleep(0.2)


def custom_objects(kubeconfig: Path, plural: str, namespace: str) -> dict[str, dict[str, Any]]:
    """Name -> object of a submariner.io/v1 kind, listed with kubernetes-asyncio through ``kubeconfig``."""

    async def read() -> dict[str, dict[str, Any]]:
        api = await api_client(kubeconfig)
        try:
            doc = await CustomObjectsApi(api).list_namespaced_custom_object("submariner.io", "v1", namespace, plural)
        finally:
            await api.close()
        return {o["metadata"]["name"]: o for o in doc["items"]}

    return asyncio.run(read())


def endpoints(api: kube.ApiServer) -> dict[str, dict[str, Any]]:
    return {name: o["spec"] for name, o in custom_objects(api.kubeconfig, "endpoints", api.namespace).items()}


def expected_endpoints(lab_: LabLayout) -> dict[str, dict[str, Any]]:
    """Every gateway's Endpoint spec as its gateway publishes it: private = node IP, public = WAN IP."""
    return {
        f"{gw.cluster}-{gw.name}": {
            "cluster_id": gw.cluster,
            "hostname": gw.name,
            "private_ip": str(gw.node_ip),
            "public_ip": str(gw.public_ip),
            "backend": "vxlan",
        }
        for gw in lab_.gateways
    }


def test_every_pod_reaches_the_other_cluster(lab: tuple[LabLayout, LabState]) -> None:
    """Pods and the ClusterIP service of the other cluster answer over TCP and UDP from every pod."""
    layout_, _st = lab
    cells = run_matrix(layout_)
    assert len(cells) == len(layout_.pods) * 4
    assert [f"{c.client.name}->{c.target_name}/{c.target.proto}" for c in cells if not c.ok] == []


def test_each_clusters_endpoints_reached_the_broker_and_the_other_cluster(lab: tuple[LabLayout, LabState]) -> None:
    """Each gateway wrote its Endpoint into its own cluster's API server; the gateways' broker sync carried it
    to the broker and from there into the other cluster's. Each cluster's own Cluster object went up too."""
    layout_, st = lab
    want = expected_endpoints(layout_)
    for api in kube.api_servers(st):
        poll(f"every Endpoint in {api.name}'s API server", lambda api=api: endpoints(api) == want)
    clusters = custom_objects(kube.broker_api(st).kubeconfig, "clusters", kube.broker_api(st).namespace)
    assert {name: o["spec"]["cluster_cidr"] for name, o in clusters.items()} == {
        "east": ["10.1.0.0/16"],
        "west": ["10.2.0.0/16"],
    }


def connections(st: LabState, cluster: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Gateway -> (haStatus, [(remote gateway, connection status)]) from the cluster's Gateway objects."""
    api = kube.cluster_api(st, cluster)
    out = {}
    for name, obj in custom_objects(api.kubeconfig, "gateways", api.namespace).items():
        status = obj.get("status") or {}
        conns = sorted((c["endpoint"]["hostname"], c["status"]) for c in status.get("connections") or [])
        out[name] = (str(status.get("haStatus")), conns)
    return out


def test_gateway_statuses_show_connected_remote_gateways(lab: tuple[LabLayout, LabState]) -> None:
    """Every gateway is active (multi-active: each holds its own Lease) and, from its route agent's probes,
    connected to both gateways of the other cluster; each connection carries a measured RTT."""
    _layout, st = lab
    for local, remote in (("east", "west"), ("west", "east")):
        remote_conns = [(f"{remote}-gw1", "connected"), (f"{remote}-gw2", "connected")]
        want = {f"{local}-gw1": ("active", remote_conns), f"{local}-gw2": ("active", remote_conns)}
        poll(f"{local}'s Gateway statuses", lambda local=local, want=want: connections(st, local) == want)
    api = kube.cluster_api(st, "east")
    gw = custom_objects(api.kubeconfig, "gateways", api.namespace)["east-gw1"]
    assert all(c["latencyRTT"]["last"].endswith("s") for c in gw["status"]["connections"])


def test_status_json_shows_the_control_plane(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """``status --json``: control plane kind, each emulator's PID (alive) and the Endpoints it holds; the
    emulators are not listed among the daemons."""
    layout_, st = lab
    out = magw_cli("lab", "status", "--name", st.name, "--json", timeout=60, check=True)
    doc = json.loads(out.stdout)
    cp = doc["control_plane"]
    assert cp["kind"] == "kube"
    recorded = {r.owner: r.pid for r in st.processes if r.kind in kube.EMULATOR_KINDS}
    assert [(e["name"], e["role"], e["pid"], e["alive"]) for e in cp["emulators"]] == [
        ("east", "cluster", recorded["east"], True),
        ("west", "cluster", recorded["west"], True),
        ("broker", "broker", recorded["broker"], True),
    ]
    assert all(e["endpoints"] == sorted(expected_endpoints(layout_)) for e in cp["emulators"])
    kubelets = {r.owner: r.pid for r in st.processes if r.kind == kube.KUBELET}
    assert [(k["cluster"], k["pid"], k["alive"]) for k in cp["kubelets"]] == [
        ("east", kubelets["east"], True), ("west", kubelets["west"], True)]  # fmt: skip
    assert {d["kind"] for d in doc["daemons"]} == {"route-agent", "gateway"}


def test_a_dead_gateway_fails_over_by_probes(lab: tuple[LabLayout, LabState]) -> None:
    """east-gw1 loses power mid-stream: flows that crossed it move, the others lose nothing and keep their
    gateways, every flow runs at the end. Its Endpoint is still in the broker and in west afterwards (its
    Lease has not even expired): the probes moved the traffic, not the control plane."""
    layout_, st = lab
    client, server = layout_.cluster("east").pods_of("east-w1")[0], layout_.cluster("west").pods_of("west-w1")[0]
    result = measure_failover(layout_, st, victim="east-gw1", client=client, server=server, flows=32, rate=200,
                              duration=6.0, fail_at=1.5)  # fmt: skip
    untouched = result.untouched
    assert len(result.crossed) > 0 and len(untouched) > 0
    assert not [f for f in untouched if f.lost], result.loss_report(untouched)
    assert [f.sport for f in result.flows if f.moved] == [f.sport for f in result.crossed]
    assert [(f.sport, f.lost_tail) for f in result.flows] == [(f.sport, 0) for f in result.flows]
    assert all("east-gw1" not in f.after.gateways for f in result.flows)
    for api in (kube.broker_api(st), kube.cluster_api(st, "west")):
        assert "east-east-gw1" in endpoints(api)


def test_a_recovered_gateway_takes_its_lease_back_at_once(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """``magw lab recover east-gw1`` restarts its daemons with the same identity: the gateway renews its own
    Lease (no takeover: the Lease never changed hands, so it waits out nothing) and its Gateway is active and
    connected again."""
    _layout, st = lab
    out = magw_cli("lab", "recover", "east-gw1", "--name", st.name, timeout=60, check=True)
    assert out.stdout.strip() == "east-gw1: underlay link up, wan link up, 2 daemons restarted"
    connected = ("active", [("west-gw1", "connected"), ("west-gw2", "connected")])
    poll("east-gw1 active and connected again", lambda: connections(st, "east").get("east-gw1") == connected)
    assert lease(kube.cluster_api(st, "east"), "magw-gateway-east-gw1") == ("east-gw1", 0)  # never changed hands


def lease(api: kube.ApiServer, name: str) -> tuple[str, int]:
    """(holderIdentity, leaseTransitions) of a Lease, read with kubernetes-asyncio."""

    async def read() -> tuple[str, int]:
        client = await api_client(api.kubeconfig)
        try:
            obj = await CoordinationV1Api(client).read_namespaced_lease(name, api.namespace)
        finally:
            await client.close()
        return str(obj.spec.holder_identity), int(obj.spec.lease_transitions or 0)

    return asyncio.run(read())


def test_down_leaves_no_process_socket_or_namespace(lab: tuple[LabLayout, LabState]) -> None:
    _layout, st = lab
    sockets = [api.socket for api in kube.api_servers(st)]
    assert all(s.is_socket() for s in sockets)
    current = state.read(st.name)  # recover restarted two daemons: new PIDs
    assert current is not None
    report = build.down(st.name)
    assert set(report.processes) == {p.pid for p in current.processes}
    assert leftovers(st.name, (*st.processes, *current.processes)) == NOTHING_LEFT
    assert [s for s in sockets if s.exists()] == []
    assert not naming.state_dir(st.name).exists()
    assert not any(procs.alive(p) for p in current.processes if p.kind in kube.EMULATOR_KINDS)


def test_cli_globalnet_demo_on_the_emulators(magw_cli: MagwCli) -> None:
    """`magw lab demo --globalnet --control-plane kube`: three clusters with the same CIDRs, every daemon fed by
    its cluster's API server emulator and the broker's; the whole matrix OK, the lab removed, exit 0."""
    name = unique_name()
    try:
        proc = magw_cli("lab", "demo", "--globalnet", "--control-plane", "kube", "--name", name, timeout=400)
    finally:
        report = build.down(name)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "== result: all OK (112/112)" in proc.stdout.splitlines()
    assert report.namespaces == ()
