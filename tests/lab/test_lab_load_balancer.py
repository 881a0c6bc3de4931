"""Gateways behind a cloud load balancer and a port-rewriting NAT (docs/load-balancer.md, the lab's
``load_balancer``): one public address per cluster with a listener per gateway, every gateway still active, and
magw's probes moving a dead gateway's flows long before the cloud's own health check notices."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import attrs
import pytest

from magw.lab.build import lifecycle as build
from magw.lab.build.state import LabState
from magw.lab.errors import LabInputError
from magw.lab.observe import cloud
from magw.lab.planes.daemons import agent_status, daemons_installed
from magw.lab.scenarios import failure
from magw.lab.scenarios.cloud_demo import fail_behind_cloud
from magw.lab.spec.cloud import NAT_PORTS
from magw.lab.spec.layout import ECHO_PORT, LabLayout, NodeLayout
from magw.lab.spec.topology import load_topology
from magw.lab.verify.connectivity import TrafficTarget, probe
from magw.model.vtep import INTER_PORT, vtep_ip, vtep_mac
from tests.support import netns as checker
from tests.support.cli import MagwCli
from tests.support.labkit import poll, running_lab, unique_name
from tests.support.paths import EXAMPLES

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="magw-route-agent / magw-gateway are not installed (pip -e .)"),
]


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    with running_lab(load_topology(EXAMPLES / "lab-load-balancer.yaml"), daemons=True) as built:
        yield built


def test_every_gateway_is_reached_at_its_own_port_of_its_clusters_one_address(
    lab: tuple[LabLayout, LabState],
) -> None:
    """No gateway has a WAN link; each remote gateway's FDB sends gateway k's VTEP to (the cloud's IP, 45000+k)."""
    layout_, _st = lab
    for c in layout_.clusters:
        assert c.cloud is not None
        for gw in c.gateways:
            links = {link["ifname"] for link in checker.ip_json(gw.namespace, "link", "show")}
            assert "wan0" not in links, gw.name
        others = [g for o in layout_.clusters if o.id != c.id for g in o.gateways]
        want = sorted(
            (vtep_mac(vtep_ip(g.node_ip, inter_cluster=True)), str(c.cloud.public_ip), g.public_port)
            for g in c.gateways
        )
        for remote in others:
            fdb = checker.bridge_json(remote.namespace, "fdb", "show", "dev", "vxlan-tunnel")
            got = sorted((e["mac"], e.get("dst"), e.get("port")) for e in fdb if e.get("dst"))
            assert got == want, remote.name


def test_lab_status_shows_the_cloud_and_each_gateways_port(
    lab: tuple[LabLayout, LabState], magw_cli: MagwCli
) -> None:
    _layout, st = lab
    lines = magw_cli("lab", "status", "--name", st.name, check=True).stdout.splitlines()
    assert [line for line in lines if line.startswith("cluster east:") and "behind cloud 198.18.0.200" in line]
    assert [line for line in lines if "east-gw2" in line and line.endswith("public 198.18.0.200:45002")]
    doc = json.loads(magw_cli("lab", "status", "--name", st.name, "--json", check=True).stdout)
    spec = {"health_interval": 2.0, "unhealthy_threshold": 2, "healthy_threshold": 2, "peered": False}
    assert doc["load_balancer"] == spec
    west = next(c for c in doc["clusters"] if c["id"] == "west")
    assert west["cloud"]["public_ip"] == "198.18.0.201"
    ports = [(g["public_ip"], g["public_port"]) for g in west["gateways"]]
    assert ports == [("198.18.0.201", 45001), ("198.18.0.201", 45002)]


def test_show_connections_says_where_each_cable_goes(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """``magw show connections``' via: each remote gateway at its cloud's address and its own port; a worker's
    paths to its own gateways at their node IPs."""
    layout_, st = lab
    out = magw_cli("show", "connections", "--lab", st.name, "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["connections"]
    want = {
        (g.name, r.name): f"public {layout_.cluster(r.cluster).cloud.public_ip}:{r.public_port}"  # type: ignore[union-attr]
        for g in layout_.gateways
        for r in layout_.gateways
        if r.cluster != g.cluster
    }
    assert {(row["node"], row["remote"]): row["via"] for row in rows} == want
    out = magw_cli("show", "connections", "--lab", st.name, "--node", "east-w1", "--json")
    rows = json.loads(out.stdout)["connections"]
    east = layout_.cluster("east").gateways
    assert {row["remote"]: row["via"] for row in rows} == {g.name: f"local {g.node_ip}" for g in east}


def test_the_far_side_sees_the_nats_address_and_rewritten_ports(lab: tuple[LabLayout, LabState]) -> None:
    """The east cloud rewrote its gateways' cable packets' source to its NAT address (not the load balancer's) and
    ports into its NAT range; a west gateway's own conntrack table sees the cable arrive from that address and such
    ports, and admits it: east's gateways publish it as natSourceIP."""
    layout_, _st = lab
    east, west = layout_.clusters
    assert east.cloud is not None and west.cloud is not None
    low, high = NAT_PORTS
    out = [t for t in cloud.translations(east.cloud.namespace) if t.orig_src in {g.node_ip for g in east.gateways}]
    assert out, "no cable packet left east's gateways"
    assert all(t.out_src == east.cloud.nat_ip and low <= t.out_sport <= high for t in out)
    assert any(t.out_sport != t.orig_sport for t in out)
    seen = cloud.parse_conntrack(
        checker.run(west.gateways[0].namespace, "conntrack", "-L", "-p", "udp", "--dport", str(INTER_PORT)).stdout
    )
    from_east = [t for t in seen if t.orig_src == east.cloud.nat_ip]
    assert from_east and all(low <= t.orig_sport <= high for t in from_east)


def test_magw_moves_a_dead_gateways_flows_before_the_cloud_notices(lab: tuple[LabLayout, LabState]) -> None:
    """east-gw1 loses power under 32 paced UDP flows: the flows that crossed it run again within a second, the
    others lose nothing, and only then (seconds later) does east's cloud take it out of its listener. Back on
    power, the cloud puts it back and it carries traffic again."""
    layout_, st = lab
    spec = layout_.topology.load_balancer
    assert spec is not None
    victim = layout_.node("east-gw1")
    cf = fail_behind_cloud(layout_, st, victim=victim.name, wait=spec.health_interval * 4 + 10)
    result = cf.result
    untouched = result.untouched
    assert len(result.crossed) > 0 and len(untouched) > 0
    assert not [f for f in untouched if f.lost], result.loss_report(untouched)
    assert not [f for f in result.crossed if f.lost_tail], result.loss_report(result.crossed)
    window = max(f.window_ms for f in result.crossed) / 1000
    assert window < 1.0, result.loss_report(result.crossed)
    assert cf.cloud_down_after is not None, "east's cloud never took east-gw1 out"
    assert window < cf.cloud_down_after
    # The cloud needs unhealthy_threshold failed checks, a check interval apart.
    assert cf.cloud_down_after >= spec.health_interval * (spec.unhealthy_threshold - 1)
    print(f"magw: crossed flows' longest window {window * 1000:.0f} ms; the cloud: {cf.cloud_down_after:.1f} s")

    def back() -> bool:
        events = cloud.health_events(st, "east")
        return any(e.kind == "up" and e.backend == victim.node_ip and e.t > result.failed_at for e in events)

    poll("east's cloud took east-gw1 back", back, limit=spec.health_interval * (spec.healthy_threshold + 2) + 30)
    # With it back (in the cloud's listener and in magw's groups), every east pod answers west again.
    client = layout_.cluster("west").pods_of("west-w1")[0]
    targets = [TrafficTarget(proto="udp", ip=p.ip, port=ECHO_PORT) for p in layout_.cluster("east").pods]
    assert all(r.ok for r in probe(client.namespace, targets))


def test_cutting_only_the_wan_of_a_gateway_behind_a_cloud_is_refused(lab: tuple[LabLayout, LabState]) -> None:
    _layout, st = lab
    why = re.escape("'east-gw2' is behind its cluster's cloud (--load-balancer): it has no WAN link")
    with pytest.raises(LabInputError, match=why):
        failure.fail(st.name, "east-gw2", wan_only=True)


def test_cli_demo_behind_the_cloud(magw_cli: MagwCli) -> None:
    """`magw lab demo --load-balancer`: the matrix, the listeners, the NAT's rewritten ports, and the power cut
    that magw answers before the cloud does; exit 0, the lab removed."""
    name = unique_name()
    topo = str(EXAMPLES / "lab-load-balancer.yaml")
    try:
        proc = magw_cli("lab", "demo", "--name", name, "--topology", topo, "--load-balancer", "--flows", "16",
                        timeout=300)  # fmt: skip
    finally:
        report = build.down(name)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    listeners = ("east: public 198.18.0.200 (no gateway has an address of its own): east-gw1 at :45001, "
                 "east-gw2 at :45002; leaving through NAT 198.18.0.210")
    assert listeners in lines
    assert [line for line in lines if line.startswith("east: ") and "outgoing UDP flows left with a rewritten" in line]
    took = re.compile(r"cloud: took east-gw1 out of its listener [\d.]+ s after the power cut")
    assert [line for line in lines if took.fullmatch(line)]
    assert "== result: all OK" in lines
    assert report.namespaces == ()


def test_on_kubernetes_each_gateway_publishes_what_its_load_balancer_service_says(magw_cli: MagwCli) -> None:
    """--control-plane kube: a LoadBalancer Service per gateway (its status the cloud's address, its port the
    gateway's listener), and each gateway runs with --public-service instead of --public-ip/--public-port: the
    Endpoints every cluster sees carry the Services' address and ports, and the cable works through them."""
    topo = load_topology(EXAMPLES / "lab-load-balancer.yaml")
    with running_lab(topo, daemons=True, control_plane="kube") as (layout_, st):
        gw = next(p for p in st.processes if p.kind == "gateway" and p.owner == "east-gw1")
        assert "--public-service" in gw.argv and "--public-ip" not in gw.argv and "--public-port" not in gw.argv
        fields = "{.spec.hostname} {.spec.public_ip} {.spec.backend_config.publicPort}"
        jsonpath = "jsonpath={range .items[*]}" + fields + "{'\\n'}{end}"
        proc = magw_cli("lab", "kubectl", "west", "--name", st.name, "--", "get", "endpoints.submariner.io", "-A",
                        "-o", jsonpath)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert sorted(proc.stdout.split("\n")[:-1]) == [
            f"{g.name} {layout_.cluster(g.cluster).cloud.public_ip} {g.public_port}"  # type: ignore[union-attr]
            for g in layout_.gateways
        ]


def _discovered(st: LabState, node: NodeLayout) -> dict[str, str]:
    """Remote gateway -> the path its NAT discovery found (route agent's status file)."""
    doc = agent_status(st, node) or {}
    peers = (doc.get("nat_discovery") or {}).get("peers") or {}
    return {host: str(p.get("path")) for host, p in peers.items()}


def test_without_peered_networks_nat_discovery_keeps_the_public_path(lab: tuple[LabLayout, LabState]) -> None:
    """No route to another cluster's private addresses: every gateway's discovery ends on the public path."""
    layout_, st = lab
    for gw in layout_.gateways:
        remotes = {r.name for r in layout_.gateways if r.cluster != gw.cluster}
        want = dict.fromkeys(remotes, "public")
        poll(f"{gw.name}'s NAT discovery done", lambda: _discovered(st, gw) == want)  # noqa: B023  # polled at once


def test_peered_networks_are_found_and_the_cable_goes_private(magw_cli: MagwCli) -> None:
    """``peered``: the clouds route each other's underlays without NAT. Each gateway's discovery finds every remote
    gateway at its private address; the FDB entries name those addresses and the cable's own port; ``show
    connections`` says so; pods still reach each other, and the cable's packets cross the clouds untranslated."""
    topo = load_topology(EXAMPLES / "lab-load-balancer.yaml")
    assert topo.load_balancer is not None
    topo = attrs.evolve(topo, load_balancer=attrs.evolve(topo.load_balancer, peered=True))
    with running_lab(topo, daemons=True) as (layout_, st):
        for gw in layout_.gateways:
            remotes = {r.name for r in layout_.gateways if r.cluster != gw.cluster}
            want = dict.fromkeys(remotes, "private")
            poll(f"{gw.name} found every remote gateway's private path", lambda: _discovered(st, gw) == want)  # noqa: B023
        east, west = layout_.clusters
        private = sorted(
            (vtep_mac(vtep_ip(g.node_ip, inter_cluster=True)), str(g.node_ip), None) for g in east.gateways
        )

        def fdb() -> list[tuple[str, str | None, int | None]]:
            found = checker.bridge_json(west.gateways[0].namespace, "fdb", "show", "dev", "vxlan-tunnel")
            return sorted((e["mac"], e.get("dst"), e.get("port")) for e in found if e.get("dst"))

        poll("west-gw1's FDB on east's private addresses", lambda: fdb() == private)
        out = magw_cli("show", "connections", "--lab", st.name, "--json", check=True)
        vias = {(r["node"], r["remote"]): r["via"] for r in json.loads(out.stdout)["connections"]}
        assert vias[("east-gw1", "west-gw2")] == f"private {west.gateways[1].node_ip} (discovered)"
        client = layout_.cluster("east").pods_of("east-w1")[0]
        targets = [TrafficTarget(proto="udp", ip=p.ip, port=ECHO_PORT) for p in west.pods]
        assert all(r.ok for r in probe(client.namespace, targets))
        assert east.cloud is not None
        cable = [t for t in cloud.translations(east.cloud.namespace)
                 if t.orig_dport == INTER_PORT and t.orig_dst in {g.node_ip for g in west.gateways}]  # fmt: skip
        assert cable and all((t.out_src, t.out_sport) == (t.orig_src, t.orig_sport) for t in cable)
