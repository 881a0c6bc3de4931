"""End to end: gateway failure detection and recovery with the real daemons in a lab (docs/health.md).

Kernel tests. Each lab has a unique name and is removed afterwards, also on
failure; every test that fails a node recovers it in ``finally``. What the
daemons did is read back with ``ip -json`` and ``nft -j`` inside the node
namespaces; traffic is real (TCP/UDP probes, paced UDP flows). Waits are
bounded polls; no assertion is about how long something took (the loss
windows are measured and printed by ``benchmarks/failover.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from ipaddress import IPv4Address

import pytest

from magw.desired.node.ids import nexthop_id
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.scenarios.failover import FailoverResult, measure_failover, measure_recovery
from magw.lab.spec.layout import ECHO_PORT, LabLayout, NodeLayout, PodLayout
from magw.lab.spec.topology import Topology, parse_topology
from magw.lab.verify.connectivity import TrafficTarget, probe_many
from magw.lab.verify.matrix import Cell, run_matrix
from magw.model.vtep import vtep_ip
from tests.support import netns as checker
from tests.support.cli import MagwCli
from tests.support.labkit import POLL_LIMIT, poll, running_lab, seen_down_by

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="magw-route-agent / magw-gateway are not installed (pip -e .)"),
]



def topology(gateways: int = 2, workers: int = 2, **extra: object) -> Topology:
    """Two clusters (``gateways`` gateways, ``workers`` workers, one pod per node) plus ``extra`` settings."""
    spec = {"gateways": gateways, "workers": workers, "pods_per_node": 1}
    return parse_topology({**extra, "clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    """east and west, 3 gateways and 1 worker each, one pod per node, resilient groups, daemons running.

    Three gateways, so that a group keeps two members when one fails: kernel 6.18 does no bucket
    selection in a resilient group with ONE member (fib_info_num_path() == 1), so no bucket is ever
    marked busy, and when the second member returns every bucket counts as idle and half of the
    established flows move at once. With two or more members left, only idle buckets move back."""
    with running_lab(topology(gateways=3, workers=1), daemons=True) as built:
        yield built


def referenced_vteps(node: NodeLayout, *, skip: frozenset[str] = frozenset({"11000"})) -> set[IPv4Address]:
    """Every VTEP a route (any table) or a nexthop group of ``node`` sends traffic to, read with ``ip -json``.
    Not keep_client_ip's steer table (11000): it routes to the nodes that host a service's pods, a gateway among
    them as any node, not through gateways (docs/client-ip.md); its return tables (11001-11014) count."""
    vteps = set()
    for route in checker.ip_json(node.namespace, "route", "show", "table", "all"):
        if str(route.get("table")) in skip:
            continue
        hops = route.get("nexthops") or ([route] if "gateway" in route else [])
        vteps |= {IPv4Address(h["gateway"]) for h in hops if "gateway" in h}
    nexthops = checker.ip_json(node.namespace, "nexthop", "show")
    by_id = {nh["id"]: nh for nh in nexthops}
    for group in (nh for nh in nexthops if "group" in nh):
        vteps |= {IPv4Address(by_id[m["id"]]["gateway"]) for m in group["group"] if "gateway" in by_id[m["id"]]}
    return {v for v in vteps if v.packed[0] in (240, 241)}


def vteps_of(gw: NodeLayout) -> set[IPv4Address]:
    return {vtep_ip(gw.node_ip, inter_cluster=False), vtep_ip(gw.node_ip, inter_cluster=True)}


def nexthop_ids(node: NodeLayout) -> set[int]:
    return {nh["id"] for nh in checker.ip_json(node.namespace, "nexthop", "show")}


# keep_client_ip's steer and return tables (docs/client-ip.md)
CLIENT_IP_TABLES = frozenset(str(t) for t in range(11000, 11015))


def nobody_uses(lab: LabLayout, gw: NodeLayout) -> bool:
    """No node of any cluster (the gateway itself aside) routes or groups toward ``gw``. Except the return table
    toward ``gw`` on its fellow gateways: a gateway does not probe the gateways of its own cluster, so it keeps
    that table until ``gw``'s endpoint expires (it only carries replies of connections that entered through
    ``gw``, which died with it); workers, which do probe, drop theirs with the failover."""
    def skip(n: NodeLayout) -> frozenset[str]:
        return CLIENT_IP_TABLES if n.gateway and n.cluster == gw.cluster else frozenset({"11000"})

    return all(not (referenced_vteps(n, skip=skip(n)) & vteps_of(gw)) for n in lab.nodes if n.name != gw.name)


def everybody_uses(lab: LabLayout, gw: NodeLayout) -> bool:
    """Every worker of its cluster and every gateway of the other clusters groups toward ``gw`` again."""
    users = [n for n in lab.nodes if (n.cluster == gw.cluster) != n.gateway]
    return all(referenced_vteps(n) & vteps_of(gw) for n in users)


def failing(cells: list[Cell]) -> list[str]:
    return [f"{c.client.name}->{c.target_name}/{c.target.proto}: {c.error}" for c in cells if not c.passed]


def unreachable(lab: LabLayout, dead: str) -> list[str]:
    """Every live pod to every live pod of the other clusters, TCP and UDP: the failures (a pod on the dead
    node, or behind a service with a backend there, cannot answer, so they are left out)."""
    live = [p for p in lab.pods if p.node != dead]
    plan = {
        c.namespace: [TrafficTarget(proto=pr, ip=t.ip, port=ECHO_PORT) for t in live if t.cluster != c.cluster for pr in
                      ("tcp", "udp")]
        for c in live
    }  # fmt: skip
    results = probe_many(plan, timeout=2.0)
    return [f"{ns}->{r.target}: {r.error}" for ns, rs in results.items() for r in rs if not r.ok]


def health(magw_cli: MagwCli, name: str) -> dict[str, dict[str, dict[str, object]]]:
    doc = json.loads(magw_cli.lab("status", "--name", name, "--json"))
    clusters: dict[str, dict[str, dict[str, object]]] = doc["health"]["clusters"]
    return clusters


def states(magw_cli: MagwCli, name: str) -> dict[str, dict[str, object]]:
    """cluster -> gateway -> state, as ``magw lab status`` reports it."""
    return {c: {gw: e["state"] for gw, e in view.items()} for c, view in health(magw_cli, name).items()}


GATEWAYS = ("east-gw1", "east-gw2", "east-gw3", "west-gw1", "west-gw2", "west-gw3")
ALL_UP = {c: dict.fromkeys(GATEWAYS, "up") for c in ("east", "west")}


def test_status_shows_every_gateway_up_in_both_clusters(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """After `up`, each cluster's nodes see all six gateways answer, and the text status says so."""
    _layout, st = lab
    poll("every gateway up in both clusters' view", lambda: states(magw_cli, st.name) == ALL_UP)
    text = magw_cli.lab("status", "--name", st.name)
    assert "  east: " + " | ".join(f"{g} up" for g in GATEWAYS) in text.splitlines()


def test_failed_gateway_is_dropped_everywhere_flows_run_and_recovery_brings_it_back(
    lab: tuple[LabLayout, LabState],
    magw_cli: MagwCli,
) -> None:
    """`magw lab fail east-gw1`: no route or group of any node of either cluster references it, every pod
    reaches the other cluster, both clusters report it down; its endpoint expires from the broker and its
    nexthop objects go. `magw lab recover`: it is back in every group and status, and flows still run."""
    layout_, st = lab
    gw = layout_.node("east-gw1")
    gone_ids = {nexthop_id(v, inter_cluster=v.packed[0] == 241) for v in vteps_of(gw)}
    try:
        out = magw_cli.lab("fail", "east-gw1", "--name", st.name)
        assert out.strip() == "east-gw1: underlay link down, wan link down, 2 daemons killed (SIGKILL)"
        poll("no route or group toward east-gw1, by the probes", lambda: nobody_uses(layout_, gw)
             and all(seen_down_by(st, layout_, o, "east-gw1") for o in ("east-w1", "west-gw1")))  # fmt: skip
        assert unreachable(layout_, gw.name) == []
        poll("east-gw1 down in both views", lambda: {c: v["east-gw1"] for c, v in states(magw_cli, st.name).items()}
             == {"east": "down", "west": "down"})  # fmt: skip
        assert json.loads(magw_cli.lab("status", "--name", st.name, "--json"))["health"]["failed"] == {
            "east-gw1": ["underlay", "wan"]
        }
        poll("east-gw1's nexthops removed after its endpoint expired",
             lambda: all(not (nexthop_ids(n) & gone_ids) for n in layout_.nodes if n.name != gw.name))  # fmt: skip
    finally:
        out = magw_cli.lab("recover", "east-gw1", "--name", st.name)
    assert out.strip() == "east-gw1: underlay link up, wan link up, 2 daemons restarted"
    poll("every user groups toward east-gw1 again", lambda: everybody_uses(layout_, gw))
    poll("all gateways up again", lambda: states(magw_cli, st.name) == ALL_UP)
    assert failing(run_matrix(layout_)) == []


def _assert_clean_failover(result: FailoverResult) -> None:
    """Flows that never crossed the victim lost nothing and kept their gateways; every flow runs at the end."""
    untouched = result.untouched
    assert not [f for f in untouched if f.lost], result.loss_report(untouched)
    assert [f.sport for f in result.flows if f.moved] == [f.sport for f in result.crossed]
    assert [(f.sport, f.lost_tail) for f in result.flows] == [(f.sport, 0) for f in result.flows]
    assert all(result.victim not in f.after.gateways for f in result.flows)
    assert len(result.crossed) > 0 and len(untouched) > 0  # 32 flows over 3x3 gateways: both kinds exist


def test_flows_that_never_crossed_the_dead_gateway_lose_nothing(
    lab: tuple[LabLayout, LabState], magw_cli: MagwCli
) -> None:
    """32 paced UDP flows east-w1 -> west-w1; east-gw2 loses power mid-stream. Flows that crossed it (per nft
    sets in every gateway) move; the others lose no datagram and keep their gateways (resilient groups).
    Then east-gw2 comes back mid-stream: no established flow moves or loses anything."""
    layout_, st = lab
    client, server = layout_.cluster("east").pods_of("east-w1")[0], layout_.cluster("west").pods_of("west-w1")[0]
    try:
        # 6 s: room to read the paths and cut the power on a loaded machine (as tests/lab/test_lab_globalnet.py)
        result = measure_failover(layout_, st, victim="east-gw2", client=client, server=server, flows=32,
                                  rate=200, duration=6.0, fail_at=1.5)  # fmt: skip
        _assert_clean_failover(result)
        recovered = measure_recovery(layout_, st, victim="east-gw2", client=client, server=server, flows=32,
                                     rate=200, duration=6.0, recover_at=1.0)  # fmt: skip
    finally:
        magw_cli.lab("recover", "east-gw2", "--name", st.name)
    # Coming back, resilient groups move only idle buckets: no established flow changes gateway or loses a packet.
    moved = [(f.sport, sorted(f.before.gateways), sorted(f.after.gateways)) for f in recovered.flows if f.moved]
    assert moved == []
    assert [(f.sport, f.lost) for f in recovered.flows] == [(f.sport, 0) for f in recovered.flows]
    poll("all gateways up again", lambda: states(magw_cli, st.name) == ALL_UP)


def _remote_routes(node: NodeLayout) -> dict[str, int | None]:
    """The main table's routes through a nexthop group or object: dst -> nhid."""
    return {r["dst"]: r.get("nhid") for r in checker.ip_json(node.namespace, "route", "show") if "nhid" in r}


def test_one_group_toward_every_remote_cluster_fails_over_in_place(magw_cli: MagwCli) -> None:
    """Three clusters: east-w1 routes west's and north's CIDRs through one group, the main class's
    (0x63FFFFFD: docs/health.md, "A local gateway's failure in O(1)"). east-gw2's power loss and its return
    are each a change of that group's members: every route keeps its nhid, the flows that never crossed
    east-gw2 lose nothing, and its return moves no established flow."""
    east = {"gateways": 3, "workers": 1, "pods_per_node": 1}
    other = {"gateways": 2, "workers": 1, "pods_per_node": 1}
    topo = parse_topology({"clusters": [{"id": "east", **east}, {"id": "west", **other}, {"id": "north", **other}]})
    with running_lab(topo, daemons=True) as (layout_, st):
        worker = layout_.node("east-w1")
        clusters = [layout_.cluster(c) for c in ("west", "north")]
        remote = {str(n) for c in clusters for n in (c.pod_cidr, c.service_cidr)}
        poll("east-w1 routes west and north through one group", lambda: _remote_routes(worker).keys() >= remote)
        before = _remote_routes(worker)
        assert {before[dst] for dst in remote} == {0x63FFFFFD}
        client, server = worker_pod(layout_, "east-w1"), worker_pod(layout_, "west-w1")
        try:
            result = measure_failover(layout_, st, victim="east-gw2", client=client, server=server, flows=32,
                                      rate=200, duration=6.0, fail_at=1.5)  # fmt: skip
            _assert_clean_failover(result)
            assert _remote_routes(worker) == before
            recovered = measure_recovery(layout_, st, victim="east-gw2", client=client, server=server, flows=32,
                                         rate=200, duration=6.0, recover_at=1.0)  # fmt: skip
        finally:
            magw_cli.lab("recover", "east-gw2", "--name", st.name)
        assert [(f.sport, f.lost, f.moved) for f in recovered.flows] == [(f.sport, 0, False) for f in recovered.flows]
        assert _remote_routes(worker) == before


def worker_pod(lab: LabLayout, node: str) -> PodLayout:
    return lab.cluster(node.split("-")[0]).pods_of(node)[0]


def test_gateway_that_lost_its_wan_is_avoided_for_remote_traffic(
    lab: tuple[LabLayout, LabState], magw_cli: MagwCli
) -> None:
    """`magw lab fail east-gw2 --wan-only`: its daemons run and it answers its worker's alive probes, but no
    longer west's reach id: east's worker leaves it out of its group toward west; every pod not on it still
    reaches the other cluster."""
    layout_, st = lab
    gw = layout_.node("east-gw2")
    workers = [n for n in layout_.cluster("east").nodes if not n.gateway]
    try:
        assert magw_cli.lab("fail", "east-gw2", "--wan-only", "--name", st.name).strip() == "east-gw2: wan link down"
        poll("east workers avoid east-gw2", lambda: all(not (referenced_vteps(w) & vteps_of(gw)) for w in workers))
        view = health(magw_cli, st.name)["east"]["east-gw2"]
        assert (view["state"], view["no_reach"]) == ("up", {"west": ["east-w1"]})
        # Its own pod routes through its own (unreachable) table 100: a gateway without WAN serves no remote
        # traffic at all. Every other pod reaches every other cluster.
        assert unreachable(layout_, gw.name) == []
    finally:
        magw_cli.lab("recover", "east-gw2", "--name", st.name)
    poll("east workers use east-gw2 again", lambda: all(referenced_vteps(w) & vteps_of(gw) for w in workers))
    poll("all gateways up again", lambda: states(magw_cli, st.name) == ALL_UP)


def test_single_gateway_mode_standby_takes_over_and_hands_back(magw_cli: MagwCli) -> None:
    """multi_active false: east-gw1 is the active gateway. When it loses power, the standby east-gw2 takes over
    (east workers and west's gateway route through it) and every pod reaches the other cluster; when east-gw1
    returns, it is the active gateway again."""
    with running_lab(topology(workers=1, multi_active=False), daemons=True) as (layout_, st):
        gw1, gw2 = layout_.node("east-gw1"), layout_.node("east-gw2")
        users = [layout_.node(n) for n in ("east-w1", "west-gw1")]
        poll("east-gw1 active", lambda: all(referenced_vteps(u) & vteps_of(gw1) for u in users))
        assert [bool(referenced_vteps(u) & vteps_of(gw2)) for u in users] == [False, False]
        try:
            magw_cli.lab("fail", "east-gw1", "--name", st.name)
            poll("east-gw2 took over, by the probes", lambda: all(referenced_vteps(u) & vteps_of(gw2) for u in users)
                 and all(seen_down_by(st, layout_, o, "east-gw1") for o in ("east-w1", "west-gw1")))  # fmt: skip
            assert [bool(referenced_vteps(u) & vteps_of(gw1)) for u in users] == [False, False]
            poll("every live pod reaches the other cluster", lambda: unreachable(layout_, gw1.name) == [])
        finally:
            magw_cli.lab("recover", "east-gw1", "--name", st.name)
        poll("east-gw1 active again", lambda: all(referenced_vteps(u) & vteps_of(gw1) for u in users))
        poll("east-gw2 standby again", lambda: not any(referenced_vteps(u) & vteps_of(gw2) for u in users))
        # The handback moves every flow (one active gateway), and the nodes polled above are two of six: the
        # others follow on their own sync, so the whole matrix is waited for (bounded), as after the takeover.
        # CI once ran it at once and found two west pods without a route yet ("No route to host").
        last: list[str] = []

        def matrix_clean() -> bool:
            last[:] = failing(run_matrix(layout_))
            return not last

        try:
            poll("every pod reaches the other cluster again", matrix_clean)
        except pytest.fail.Exception:
            pytest.fail(f"not every pod reaches the other cluster after the handback, {POLL_LIMIT:g} s on: {last}")
