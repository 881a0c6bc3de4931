"""Kernel test: Globalnet on OVN, with packets (docs/ovn-globalnet.md).

``magw lab up --cni ovn`` (through the CLI) of a small Globalnet clusterset whose two clusters share their pod
and service CIDRs: east with two gateways and a worker, namespace ``shop`` with ``db-0`` (pod-selector
GlobalEgressIP ``db``), ``batch-1`` (namespace GlobalEgressIP ``all``) and ``web-0`` (backs the exported headless
service ``web``); west with one gateway and a worker, whose default pods back the exported headless service
``direct``. Both export a ClusterIP service ``echo``. Pods' packets cross OVN (br-int, geneve) to a gateway
router, the gateway host's Globalnet translation, and the tunnel.

The oracles: the controllers' statuses read with a plain ``FileBroker`` (tests/support/globalnet_lab.py), the
source address each echo server reports, the seed's join addresses of the gateway routers (docs/ovn.md, written
out here), and the kernel's, nft's and the NB's own read-back. Then one test per fix of the seed (Submariner
issues 1981-1984): turn it off in the running lab, see the packet die (or lose its source), turn it back on,
see it pass (tests/support/ovn_globalnet_fixes.py). The lab is removed afterwards in every case.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from ipaddress import IPv4Address

import pytest

from magw.lab.build import procs, state
from magw.lab.build.state import LabState
from magw.lab.planes import ovn_nodes
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.ovn import ovn_dir
from magw.lab.planes.ovn_servers import ovn_missing
from magw.lab.planes.ovn_topology import nbctl
from magw.lab.scenarios.globalnet_demo import matrix_text, run_globalnet_matrix
from magw.lab.spec.layout import ECHO_PORT, LabLayout, layout
from magw.lab.verify.connectivity import ConnectivityResult, TrafficTarget, probe, probe_many
from tests.support import ovn_globalnet_fixes as fixes
from tests.support.cli import MagwCli
from tests.support.globalnet_lab import egress_owner, ingress_ip, pod_ns, seen, status
from tests.support.labkit import poll, unique_name

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ovn,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

TOPOLOGY = """\
globalnet: true
clusters:
  - id: east
    pod_cidr: 10.0.0.0/16
    service_cidr: 100.0.0.0/16
    gateways: 2
    workers: 1
    pods_per_node: 1
    cluster_egress_ips: 2
    pods:
      - {name: db-0, namespace: shop, node: w1, labels: {role: db}}
      - {name: web-0, namespace: shop, node: gw1, labels: {app: web}}
      - {name: batch-1, namespace: shop, node: w1}
    services:
      - {name: echo, selector: {app: echo}, export: true}
      - {name: web, namespace: shop, selector: {app: web}, headless: true, export: true}
    global_egress_ips:
      - {name: db, namespace: shop, number_of_ips: 1, pod_selector: {matchLabels: {role: db}}}
      - {name: all, namespace: shop, number_of_ips: 2}
  - id: west
    pod_cidr: 10.0.0.0/16
    service_cidr: 100.0.0.0/16
    gateways: 1
    workers: 1
    pods_per_node: 1
    cluster_egress_ips: 2
    services:
      - {name: echo, selector: {app: echo}, export: true}
      - {name: direct, selector: {app: echo}, headless: true, export: true}
"""
PROTOS = ("tcp", "udp")
LOCAL_CIDRS = ["10.0.0.0/16", "100.0.0.0/16"]  # both clusters' pod and service CIDRs
GLOBAL = {"east": "242.1.0.0/16", "west": "242.2.0.0/16"}  # the default global CIDRs (docs/lab.md)
# The seed's join addresses of the gateway routers (docs/ovn.md): slot 1 .1, slot k .(k+1). With several active
# gateways (multi-active) a router's load balancers SNAT to it (lb_force_snat_ip=router_ip).
JOIN_IPS = {"169.254.254.1", "169.254.254.3"}
# ovn-k8s-mp0 of east-gw1 and east-gw2: their node subnets' last host address (docs/lab.md, "--cni ovn").
EAST_GW_MGMT = {"10.0.1.254", "10.0.2.254"}
REPAIR_LIMIT = 45.0  # seconds: magw's reconcilers resync every 30 s


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, magw_cli: MagwCli) -> Iterator[tuple[LabLayout, LabState]]:
    reason = ovn_missing() or ovn_nodes.ovs_missing()
    if reason:
        pytest.skip(reason)
    name = unique_name()
    topo = tmp_path_factory.mktemp("ovngn") / "lab.yaml"
    topo.write_text(TOPOLOGY)
    try:
        up = magw_cli("lab", "up", "--name", name, "--cni", "ovn", "--topology", str(topo), "--timeout", "90",
                      timeout=300)  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        st = state.read(name)
        assert st is not None
        yield layout(name, st.topology), st
    finally:
        magw_cli("lab", "down", "--name", name, timeout=120)


def direct(st: LabState) -> IPv4Address:
    """The global IP of west's pod w1-p1 (a backend of the exported headless service ``direct``)."""
    return ingress_ip(st, "west", "default", "pod-w1-p1")


def cluster_egress(st: LabState, cluster: str) -> set[str]:
    return {ip for ip, o in egress_owner(st, cluster).items() if o.startswith("ClusterGlobalEgressIP/")}


def at_once(*pairs: tuple[str, IPv4Address]) -> list[ConnectivityResult]:
    """One short TCP probe from each namespace to its address, all in parallel, results in order: an "off"
    window must be short (magw repairs drift at its next resync, tests/support/ovn_globalnet_fixes.py)."""
    plan: dict[str, list[TrafficTarget]] = {}
    for ns, ip in pairs:
        plan.setdefault(ns, []).append(TrafficTarget(proto="tcp", ip=ip, port=ECHO_PORT))
    results = probe_many(plan, timeout=1.5, attempts=1)
    return [results[ns].pop(0) for ns, _ in pairs]


def forget_the_off_window(layout_: LabLayout, st: LabState) -> None:
    """After an "off" window, before the "on" checks: every gateway's OVS conntrack forgets the half-open
    connections the window left (``fixes.flush_ovs_conntrack``: an OVS 3.1 userspace-conntrack assertion)."""
    for gw in layout_.gateways:
        fixes.flush_ovs_conntrack(ovn_nodes.ovs_dir(st, gw))


# ---- what works -------------------------------------------------------------------------------------------


def test_up_runs_globalnet_on_ovn(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """The refusal is gone; the reroute policy steers east's pods to west's GLOBAL CIDR (the pod CIDRs are the
    same in both clusters), through both gateway routers."""
    _layout, st = lab
    doc = json.loads(magw_cli.lab("status", "--name", st.name, "--json"))
    assert doc["cni"] == "ovn" and doc["globalnet"] is True
    d = ovn_dir(st, "east")
    assert nbctl(d, "get", "Address_Set", "submariner_remote_west", "addresses").strip() == f'["{GLOBAL["west"]}"]'
    hops = nbctl(d, "--bare", "--columns=nexthops", "find", "Logical_Router_Policy", "priority=20000").split()
    assert sorted(hops) == sorted(JOIN_IPS)


@pytest.mark.parametrize("proto", PROTOS)
def test_the_server_sees_the_global_ip_of_each_precedence_level(lab: tuple[LabLayout, LabState], proto: str) -> None:
    layout_, st = lab
    target = direct(st)
    db = {str(ip) for ip in status(st, "east", "GlobalEgressIP", "shop", "db").allocated_ips}
    all_ = {str(ip) for ip in status(st, "east", "GlobalEgressIP", "shop", "all").allocated_ips}
    web = str(ingress_ip(st, "east", "shop", "pod-web-0"))
    assert seen(pod_ns(layout_, "east", "w1-p1"), target, proto) in cluster_egress(st, "east")  # level 4
    assert seen(pod_ns(layout_, "east", "batch-1"), target, proto) in all_  # level 3: namespace
    assert seen(pod_ns(layout_, "east", "db-0"), target, proto) in db  # level 1: pod selector
    assert seen(pod_ns(layout_, "east", "web-0"), target, proto) == web  # level 2: headless pod, its own IP
    # host network of the worker: table 150 into OVN, then a cluster egress IP at the gateway (1982)
    assert seen(layout_.node("east-w1").namespace, target, proto) in cluster_egress(st, "east")


@pytest.mark.parametrize("proto", PROTOS)
def test_a_headless_pod_is_reachable_by_its_global_ip(lab: tuple[LabLayout, LabState], proto: str) -> None:
    layout_, st = lab
    web = ingress_ip(st, "east", "shop", "pod-web-0")
    for client in layout_.cluster("west").pods:  # each is itself a headless backend: web-0 sees its own global IP
        (r,) = probe(client.namespace, [TrafficTarget(proto=proto, ip=web, port=ECHO_PORT)], timeout=2.0, attempts=3)
        assert r.ok, f"{client.name} -> web-0 {web}: {r.error}"
        assert r.server == "east-web-0"
        assert r.seen_ip == str(ingress_ip(st, "west", "default", f"pod-{client.short}"))
    assert seen(layout_.node("west-w1").namespace, web, proto) in cluster_egress(st, "west")


@pytest.mark.parametrize("proto", PROTOS)
def test_every_exported_clusterip_service_is_reachable_by_its_global_ip(
    lab: tuple[LabLayout, LabState], proto: str
) -> None:
    """The gateway turns the global IP into the ClusterIP, table 149 hands it to a gateway router, whose
    clusterLBGroup balances it; the backend sees that router's join address (lb_force_snat_ip, docs/ovn.md)."""
    layout_, st = lab
    failures = []
    for src, dst in (("east", "west"), ("west", "east")):
        gip = ingress_ip(st, dst, "default", "svc-echo")
        for pod in layout_.cluster(src).pods:
            (r,) = probe(pod.namespace, [TrafficTarget(proto=proto, ip=gip, port=ECHO_PORT)], timeout=2.0, attempts=3)
            if not (r.ok and (r.server or "").startswith(f"{dst}-") and r.seen_ip in JOIN_IPS):
                failures.append(f"{pod.name} -> {dst} {gip}: ok={r.ok} server={r.server} seen={r.seen_ip} {r.error}")
    assert failures == []


def test_tcp_connections_leave_through_both_east_gateways(lab: tuple[LabLayout, LabState]) -> None:
    """Several active gateways carry Globalnet traffic on OVN: 16 TCP connections of one pod are spread by the
    reroute policy's ECMP hash, and the source each server saw is a cluster egress IP of the gateway it left by."""
    layout_, st = lab
    target = TrafficTarget(proto="tcp", ip=direct(st), port=ECHO_PORT)
    results = probe(pod_ns(layout_, "east", "w1-p1"), [target] * 16, timeout=2.0, attempts=3)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    owner = egress_owner(st, "east")
    assert {owner[r.seen_ip or ""].rsplit("@", 1)[1] for r in results} == {"east-gw1", "east-gw2"}


def test_the_demo_matrix_explains_every_source(lab: tuple[LabLayout, LabState]) -> None:
    """``magw lab demo --globalnet``'s matrix on this OVN lab: every client (every pod, each cluster's worker as
    host network) to every global IP the other cluster exports, each answered with the source precedence expects;
    behind a ClusterIP service, the join address of the ingress gateway's router."""
    layout_, st = lab
    rows = run_globalnet_matrix(layout_, st)
    assert len(rows) == 7 * 3 + 3 * 2  # east: 6 pods + host x (svc, 2 headless pods); west: 2 pods + host x 2
    assert [f"{r.client.cluster} {r.client.name} -> {r.target}: {r.seen} {r.why}" for r in rows if not r.passed] == []
    assert "gateway router of west-gw1 (load-balancer SNAT)" in matrix_text(rows)


# ---- each fix of the seed, off and on again (these change the lab for a moment: keep them last) ----------


def test_1982_table_150_takes_the_workers_host_network_to_remote_global_cidrs(lab: tuple[LabLayout, LabState]) -> None:
    """Submariner 1982: with Globalnet, table 150 on workers was empty, so the host network's traffic to remote
    clusters missed OVN. Off: east-w1's table-150 route (to west's GLOBAL CIDR) deleted. The host's probe dies:
    here at once (a lab node has no default route; a real node's would take the packet out of the cluster),
    while the worker's pod, which OVN routes, still gets through. On: the route put back exactly."""
    layout_, st = lab
    host, pod = layout_.node("east-w1").namespace, pod_ns(layout_, "east", "w1-p1")
    target = direct(st)
    saved = fixes.table_routes(host, 150)
    assert [r["dst"] for r in saved] == [GLOBAL["west"]] and saved[0]["dev"] == "ovn-k8s-mp0"
    assert seen(host, target, "tcp") in cluster_egress(st, "east")

    def off() -> None:
        fixes.ip(host, "route", "del", GLOBAL["west"], "table", "150", check=False)

    try:
        dead, alive = fixes.while_off(
            "1982", off, lambda: not fixes.table_routes(host, 150), lambda: at_once((host, target), (pod, target))
        )
    finally:
        fixes.ip(host, "route", "replace", *fixes.replace_args(saved[0], 150))
        forget_the_off_window(layout_, st)
    assert not dead.ok, f"the worker's host reached {target} without table 150"
    assert alive.ok and alive.seen_ip in cluster_egress(st, "east")
    assert seen(host, target, "tcp") in cluster_egress(st, "east")


def test_1983_table_149_holds_the_local_cidrs_not_the_global_cidr(lab: tuple[LabLayout, LabState]) -> None:
    """Submariner 1983: with Globalnet, table 149 on the gateway held the cluster's global CIDR. But the gateway
    turns a global destination into the local address before routing, so table 149 no longer matches: the packet
    takes the main table's route into OVN by ovn-k8s-mp0, where OVN-Kubernetes' management port SNAT (modelled by
    the lab) hides the client. Off: on both east gateways table 149 holds east's global CIDR instead of the local
    CIDRs. West's pod reaches the headless pod web-0 seen as an east gateway's management address, not as its own
    global IP, and the exported ClusterIP service not at all (the node switch it enters has no load balancer).
    East's own egress still works (its replies' NAT is conntrack's, decided on the way out). On: the routes put
    back exactly."""
    layout_, st = lab
    gateways = [g.namespace for g in layout_.cluster("east").gateways]
    client, east_pod = pod_ns(layout_, "west", "w1-p1"), pod_ns(layout_, "east", "w1-p1")
    own = str(ingress_ip(st, "west", "default", "pod-w1-p1"))
    web, svc = ingress_ip(st, "east", "shop", "pod-web-0"), ingress_ip(st, "east", "default", "svc-echo")
    target = direct(st)
    saved = {ns: fixes.table_routes(ns, 149) for ns in gateways}
    assert all(sorted(r["dst"] for r in routes) == LOCAL_CIDRS for routes in saved.values())
    assert seen(client, web, "tcp") == own

    def off() -> None:
        for ns in gateways:
            for cidr in LOCAL_CIDRS:
                fixes.ip(ns, "route", "del", cidr, "table", "149", check=False)
            fixes.ip(ns, "route", "replace", GLOBAL["east"], "via", fixes.UP_IP, "dev", "ovn-k8s-sub0", "table", "149",
                     "proto", "157", "metric", "100")  # fmt: skip

    def still_off() -> bool:
        return all([r["dst"] for r in fixes.table_routes(ns, 149)] == [GLOBAL["east"]] for ns in gateways)

    try:
        to_web, to_svc, egress = fixes.while_off(
            "1983", off, still_off, lambda: at_once((client, web), (client, svc), (east_pod, target))
        )
    finally:
        for ns, routes in saved.items():
            fixes.ip(ns, "route", "del", GLOBAL["east"], "table", "149", check=False)
            for route in routes:
                fixes.ip(ns, "route", "replace", *fixes.replace_args(route, 149))
        forget_the_off_window(layout_, st)
    assert to_web.ok and to_web.seen_ip in EAST_GW_MGMT, f"web-0 saw {to_web.seen_ip} ({to_web.error})"
    assert not to_svc.ok, f"the service answered through the main table: {to_svc.seen_ip}"
    assert egress.ok and egress.seen_ip in cluster_egress(st, "east"), (egress.seen_ip, egress.error)
    assert seen(client, web, "tcp") == own
    assert seen(client, svc, "tcp") in JOIN_IPS


def test_1984_submariner_router_routes_the_local_cidrs_back_into_the_cluster(lab: tuple[LabLayout, LabState]) -> None:
    """Submariner 1984: with Globalnet, the submariner_router's routes back into the cluster were for the global
    CIDR; but a packet arrives from the gateway host already translated to a local address. Off (ovn-nbctl):
    every submariner_router*'s routes toward ovn_cluster_router get east's global CIDR as prefix. Both
    directions die: west's pod to web-0, and east's pod to west (its replies). On: the OVN syncer's next resync
    (every 30 s) repairs the rows (docs/ovn-globalnet.md: it could not before, a drifted route's prefix made
    every sync fail), then both pass."""
    layout_, st = lab
    d = ovn_dir(st, "east")
    west_pod, east_pod = pod_ns(layout_, "west", "w1-p1"), pod_ns(layout_, "east", "w1-p1")
    web, target = ingress_ip(st, "east", "shop", "pod-web-0"), direct(st)
    saved = fixes.routes_into_cluster(d)
    assert sorted(p for _, p in saved) == sorted(LOCAL_CIDRS * 2)  # two gateway routers, each the local CIDRs

    def still_off() -> bool:
        return {p for _, p in fixes.routes_into_cluster(d)} == {GLOBAL["east"]}

    try:
        in_, out = fixes.while_off(
            "1984", lambda: fixes.set_route_prefixes(d, GLOBAL["east"]), still_off,
            lambda: at_once((west_pod, web), (east_pod, target)),
        )  # fmt: skip
        assert not in_.ok and not out.ok, (in_, out)
        poll("the OVN syncer repairs submariner_router's routes", lambda: not still_off(), REPAIR_LIMIT)
        poll("both repaired", lambda: sorted(p for _, p in fixes.routes_into_cluster(d)) == sorted(LOCAL_CIDRS * 2))
        nbctl(d, "--wait=hv", "sync")
    finally:
        fixes.put_route_prefixes(d, saved)
        forget_the_off_window(layout_, st)
    assert seen(west_pod, web, "tcp") == str(ingress_ip(st, "west", "default", "pod-w1-p1"))
    assert seen(east_pod, target, "tcp") in cluster_egress(st, "east")


def test_1981_the_globalnet_snat_is_in_the_postrouting_base_chain(lab: tuple[LabLayout, LabState]) -> None:
    """Submariner 1981: the jump from SUBMARINER-POSTROUTING into the Globalnet egress chain was sometimes
    missing, and pods' packets left the gateway with their local source. magw's Globalnet SNAT rules sit in the
    postrouting base chain itself: no jump to lose. Off: on both east gateways the rules moved into a chain that
    nothing jumps to. Pods of every many-to-one level and the worker's host network leave east with their LOCAL
    source (a counter on west-gw1's tunnel sees them) and get no answer; the headless pod web-0 still does (its
    global source is a stateless rewrite after NAT, not an SNAT). On: the route agents' next resync puts the
    rules back in the base chain and drops the foreign chain; the window's connections are still in the east
    gateways' conntrack without NAT (forgotten by the test before the last probes: a reused source port would
    leave un-NATed again)."""
    layout_, st = lab
    gateways = [g.namespace for g in layout_.cluster("east").gateways]
    west_gw = layout_.node("west-gw1").namespace
    target = direct(st)
    egress = [pod_ns(layout_, "east", p) for p in ("w1-p1", "batch-1", "db-0")] + [layout_.node("east-w1").namespace]
    web = pod_ns(layout_, "east", "web-0")
    assert all(len(fixes.globalnet_snat_rules(ns)) == 3 for ns in gateways)

    def still_off() -> bool:
        return all(not fixes.globalnet_snat_rules(ns) for ns in gateways)

    def off() -> None:
        for ns in gateways:
            fixes.move_globalnet_snat(ns)

    def observe() -> list[ConnectivityResult]:
        return at_once(*((ns, target) for ns in (*egress, web)))

    fixes.add_leak_counter(west_gw, LOCAL_CIDRS[0], GLOBAL["west"])
    try:
        for ns in egress:
            assert seen(ns, target, "tcp") in egress_owner(st, "east")
        assert fixes.leak_count(west_gw) == 0
        *dead, headless = fixes.while_off("1981", off, still_off, observe)
        assert [r.ok for r in dead] == [False] * len(egress), [(r.seen_ip, r.error) for r in dead]
        assert headless.ok and headless.seen_ip == str(ingress_ip(st, "east", "shop", "pod-web-0"))
        assert fixes.leak_count(west_gw) >= len(egress)
        poll("the route agents put the Globalnet SNAT back", lambda: all(
            len(fixes.globalnet_snat_rules(ns)) == 3 and fixes.MOVED_CHAIN not in fixes.chains(ns) for ns in gateways
        ), REPAIR_LIMIT)  # fmt: skip
        # The east gateways' conntrack still holds the window's connections without NAT: a new connection that
        # reuses one's source port would leave un-NATed again (for up to conntrack's SYN_SENT timeout, 120 s).
        stale = {ns: fixes.unnated_connections(ns, GLOBAL["west"]) for ns in gateways}
        assert any(stale.values())
    finally:
        fixes.drop_leak_counter(west_gw)
        for ns in gateways:
            fixes.forget_connections(ns, fixes.unnated_connections(ns, GLOBAL["west"]))
        forget_the_off_window(layout_, st)
    for ns in egress:
        assert seen(ns, target, "tcp") in egress_owner(st, "east")


def test_no_lab_process_died(lab: tuple[LabLayout, LabState]) -> None:
    """Every daemon, server and switch of the lab outlived the tests (an ovs-vswitchd that aborted would take its
    gateway's datapath down and fail the tests after it for a reason of its own)."""
    _layout, st = lab
    dead = [f"{p.kind} {p.owner} (log {p.log})" for p in st.processes if not procs.alive(p)]
    assert dead == []
