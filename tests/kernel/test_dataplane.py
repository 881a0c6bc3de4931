"""Real traffic across two clusters wired by hand, with every node programmed by our drivers.

East has two gateways and a worker, west a gateway and a worker (tests/support/dataplane_topology.py).
Each node's state is planned from a Snapshot and applied with the real NetlinkDriver +
NftDriver. Then UDP and TCP go from a pod of one cluster to a pod of the other, both ways:
every request is answered, and the server sees the client pod's own IP (not a node's),
although every node masquerades pod traffic leaving its cluster in a CNI table of its own.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from magw.desired.node.planner import plan
from magw.drivers.netlink.capabilities import set_hash_policy
from magw.model import Strategy
from tests.support.dataplane_topology import EAST, HOSTS, WEST, Topology, build, snapshot
from tests.support.kernel_node import real_node_driver, sync_once
from tests.support.netns import NsFactory, ip_json, run
from tests.support.paths import SUPPORT

pytestmark = pytest.mark.kernel

ECHO = str(SUPPORT / "dataplane_echo.py")
PORT = 7000
FLOWS = 8
SERVER_SECONDS = 60


def _apply_everywhere(top: Topology, strategy: Strategy) -> None:
    for host in HOSTS:
        ns = top.nodes[host.name]
        desired = plan(snapshot(host.cluster, strategy), host.name)
        set_hash_policy(ns, 1)
        with real_node_driver(ns) as driver:
            result = sync_once(driver, desired).result
            assert [f.describe() for f in result.failed] == []
            assert driver.observe() == desired


def _netns_cmd(ns: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", ns, sys.executable, ECHO, *args]


@pytest.fixture
def servers() -> Iterator[Callable[[str, str, str], subprocess.Popen[str]]]:
    """Start echo servers (killed by PID afterwards); each call returns once the server is listening."""
    started: list[subprocess.Popen[str]] = []

    def start(ns: str, proto: str, ip: str) -> subprocess.Popen[str]:
        args = _netns_cmd(ns, f"{proto}-server", ip, str(PORT), "--seconds", str(SERVER_SECONDS))
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 15)
        assert ready == [proc.stdout], f"{proto} server in {ns} did not start"
        assert proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def _client(ns: str, proto: str, ip: str) -> tuple[list[str], int]:
    """(answers, lost) of a client run: FLOWS requests, each from its own source port."""
    args = _netns_cmd(ns, f"{proto}-client", ip, str(PORT), "--count", str(FLOWS), "--timeout", "2", "--tries", "3")
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    doc = json.loads(out.stdout)
    return [str(a) for a in doc["answers"]], int(doc["lost"])


def _pod_ip(cluster_id: str) -> tuple[str, str]:
    host = next(h for h in HOSTS if h.cluster.id == cluster_id and h.pod_ip is not None)
    assert host.pod_ip is not None
    return host.name, host.pod_ip


@pytest.mark.parametrize("strategy", list(Strategy))
def test_pod_to_pod_across_clusters_keeps_source_ip(
    ns_factory: NsFactory, servers: Callable[[str, str, str], subprocess.Popen[str]], strategy: Strategy
) -> None:
    """UDP and TCP between the pods of east and west, both ways: all answered, the server sees the pod IP."""
    top: Topology = build(ns_factory)
    _apply_everywhere(top, strategy)
    for client_cluster, server_cluster in ((EAST, WEST), (WEST, EAST)):
        client_host, client_ip = _pod_ip(client_cluster.id)
        server_host, server_ip = _pod_ip(server_cluster.id)
        for proto in ("udp", "tcp"):
            servers(top.pods[server_host], proto, server_ip)
            answers, lost = _client(top.pods[client_host], proto, server_ip)
            seen_ips = sorted({answer.split(":")[0] for answer in answers})
            direction = f"{proto} {client_cluster.id}->{server_cluster.id}"
            assert (lost, len(answers), seen_ips) == (0, FLOWS, [client_ip]), direction


def test_worker_routes_through_both_gateways(ns_factory: NsFactory) -> None:
    """The east worker's route to west points at a resilient group holding both east gateways' VTEPs."""
    top = build(ns_factory)
    _apply_everywhere(top, Strategy.RESILIENT)
    worker = top.nodes["e-w1"]
    route = ip_json(worker, "route", "show", "10.2.0.0/16")[0]
    group = next(n for n in ip_json(worker, "nexthop", "show") if n["id"] == route["nhid"])
    members = sorted(
        n["gateway"] for n in ip_json(worker, "nexthop", "show") if n["id"] in {m["id"] for m in group["group"]}
    )
    assert (group["type"], members) == ("resilient", ["240.18.0.6", "240.18.0.8"])


def test_control_without_our_nft_table_the_cni_masquerade_wins(
    ns_factory: NsFactory, servers: Callable[[str, str, str], subprocess.Popen[str]]
) -> None:
    """Control for the source-IP assertion: with our nft tables deleted, the east worker's CNI masquerade
    rewrites the pod's source to the worker's vx-submariner address; the server sees that address and its
    answer cannot come back (no route in west to east's 240/8 VTEPs)."""
    top = build(ns_factory)
    _apply_everywhere(top, Strategy.RESILIENT)
    for ns in top.nodes.values():
        run(ns, "nft", "delete", "table", "ip", "magw")
    server = servers(top.pods["w-w1"], "udp", "10.2.3.10")
    args = _netns_cmd(top.pods["e-w1"], "udp-client", "10.2.3.10", str(PORT), "--count", "2", "--timeout", "1")
    out = subprocess.run([*args, "--tries", "1"], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == {"answers": [], "lost": 2}
    server.kill()
    seen, _ = server.communicate(timeout=10)
    assert sorted({line.split()[1].split(":")[0] for line in seen.splitlines()}) == ["240.18.0.3"]
