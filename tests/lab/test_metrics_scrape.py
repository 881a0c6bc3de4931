"""Kernel test: every daemon of a lab scraped over HTTP, as Prometheus does, before and during a gateway's
failure (docs/metrics.md).

One lab for the module: Globalnet over the WireGuard cable, east and west with two gateways and a worker each,
and east's egress gateway (keepalived, conntrackd) with VIP ``shop`` on gw1 and gw2. Each daemon's
``/metrics`` (route agents and gateways in their node's namespace, the Globalnet and egress controllers in their
cluster's underlay namespace) must have every family docs/metrics.md lists for its kind, and the values must
say what the lab did: every connection up, then the VIP holder's power cut (an east gateway) and every node that
probes it counting a failover with its detection time, the VIP's holder changing, the Globalnet pool adding up.
The oracle is the lab's topology and what the test did, not the daemons' own status files.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from ipaddress import IPv4Network

import pytest
from prometheus_client.parser import text_string_to_metric_families

from magw.lab.build.state import LabState
from magw.lab.observe.egressgw_status import kernel_holders
from magw.lab.planes.daemons import (
    GATEWAY_METRICS_PORT,
    GLOBALNET_METRICS_PORT,
    ROUTE_AGENT_METRICS_PORT,
    daemons_installed,
)
from magw.lab.planes.egressgw_daemons import METRICS_PORT as EGRESS_METRICS_PORT
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from magw.metrics.catalogue import of
from tests.support.cli import MagwCli
from tests.support.labkit import poll, running_lab
from tests.support.small_lab import poll_for

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

TOPOLOGY = {
    "globalnet": True,
    "multi_active": True,
    "cable": "wireguard",
    "clusters": [
        {"id": c, "pod_cidr": "10.0.0.0/16", "service_cidr": "100.0.0.0/16", "gateways": 2, "workers": 1,
         "pods_per_node": 1, "cluster_egress_ips": 2,
         "services": [{"name": "echo", "selector": {"app": "echo"}, "export": True},  # verify: every pod a global IP
                      {"name": "direct", "selector": {"app": "echo"}, "headless": True, "export": True}]}
        for c in ("east", "west")
    ],
    "egress": {"cluster": "east", "advert_int": 0.1, "conntrack_sync": True,
               "vips": [{"name": "shop", "candidates": ["gw1", "gw2"], "bindings": [{"namespace": "default"}]}]},
}  # fmt: skip

Samples = dict[str, list[tuple[dict[str, str], float]]]  # family -> [(labels, value)], sample names as exposed


def scrape(namespace: str, port: int) -> tuple[set[str], Samples]:
    """``/metrics`` of the daemon listening on 127.0.0.1:PORT in ``namespace``: family names (counters with
    ``_total``) and every sample by name."""
    url = f"http://127.0.0.1:{port}/metrics"
    code = f"import urllib.request as u; print(u.urlopen({url!r}, timeout=10).read().decode())"
    text = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=30, check=True).stdout  # fmt: skip
    families: set[str] = set()
    samples: Samples = {}
    for fam in text_string_to_metric_families(text):
        families.add(fam.name + ("_total" if fam.type == "counter" else ""))
        for s in fam.samples:
            samples.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return families, samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels``; None when there is none."""
    found = [v for got, v in samples.get(name, []) if labels.items() <= got.items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState, float]]:
    """The lab, and the time just before it was brought up."""
    before = time.time()
    with running_lab(parse_topology(TOPOLOGY), daemons=True, wait_timeout=180.0) as (layout_, st):
        yield layout_, st, before


def _documented(daemon: str, families: set[str]) -> None:
    missing = sorted({m.name for m in of(daemon)} - families)
    assert missing == [], f"{daemon}: documented but not exported: {missing}"


def _connected(lab: LabLayout, gateway: str) -> Callable[[], bool]:
    def check() -> bool:
        _, s = scrape(lab.node(gateway).namespace, ROUTE_AGENT_METRICS_PORT)
        return len([v for labels, v in s.get("submariner_connections", []) if labels["status"] == "connected"]) == 2
    return check


def test_every_daemon_exports_its_documented_metrics(lab: tuple[LabLayout, LabState, float], magw_cli: MagwCli) -> None:
    layout_, st, before = lab
    for g in layout_.gateways:
        poll(f"{g.name}: both connections connected", _connected(layout_, g.name), limit=120.0)
    # some inter-cluster flows for the gateways to carry (verify's suite: pods and services by global IP)
    assert magw_cli("verify", "--lab", st.name, "--flows", "8", stdin="", timeout=300).returncode == 0
    for node in layout_.nodes:
        families, s = scrape(node.namespace, ROUTE_AGENT_METRICS_PORT)
        _documented("route-agent", families)
        local = [g for g in layout_.gateways if g.cluster == node.cluster]
        assert value(s, "submariner_gateways", local_cluster=node.cluster) == len(local)
        assert value(s, "magw_fail_static_clusters") == 0  # every gateway up: no cluster kept by fail static
        if node.public_ip is None:  # a worker: paths to its own gateways, no connections
            assert {labels["peer"] for labels, v in s["magw_path_up"] if v == 1} == {g.name for g in local}
            assert "submariner_connections" not in s
            continue
        remote = [g for g in layout_.gateways if g.cluster != node.cluster]
        for g in remote:
            conn = {"local_hostname": node.name, "remote_hostname": g.name, "cable_driver": "wireguard"}
            assert value(s, "submariner_connections", status="connected", **conn) == 1
            rtt = value(s, "submariner_connection_latency_seconds", **conn)
            assert rtt is not None and 0 < rtt < 1.0
            since = value(s, "submariner_connection_established_timestamp", **conn)
            assert since is not None and before <= since <= time.time()
            answered = value(s, "magw_probe_rtt_seconds_count", peer=g.name)
            assert answered is not None and answered > 10
        assert value(s, "magw_nexthop_group_replaces_total") >= 1  # type: ignore[operator]
    # the WireGuard counters are read at each cable check (at least every 30 s): wait for probes to show there
    gw = layout_.node("east-gw2")
    poll("east-gw2's cable counters toward west-gw1",
         lambda: (value(scrape(gw.namespace, ROUTE_AGENT_METRICS_PORT)[1], "submariner_gateway_rx_bytes",
                        remote_hostname="west-gw1") or 0) > 0, limit=75.0)  # fmt: skip
    carried = 0.0
    for g in layout_.gateways:
        s = scrape(g.namespace, ROUTE_AGENT_METRICS_PORT)[1]
        carried += sum(v for labels, v in s.get("magw_gateway_flows", []))
        families, s = scrape(g.namespace, GATEWAY_METRICS_PORT)
        _documented("gateway", families)
        assert value(s, "magw_gateway_endpoint_published") == 1
    assert carried > 0, "verify's flows crossed the gateways, and none tracks any"
    for c in layout_.clusters:
        families, s = scrape(c.underlay_ns, GLOBALNET_METRICS_PORT)
        _documented("globalnet", families)
        cidr = {"cidr": str(c.global_cidr)}
        usable = IPv4Network(cidr["cidr"]).num_addresses - 2
        allocated = value(s, "submariner_global_IP_allocated", **cidr)
        assert allocated is not None and allocated > 0
        assert allocated + (value(s, "submariner_global_IP_availability", **cidr) or 0) == usable
        cluster_egress = value(s, "submariner_cluster_global_egress_IP_allocated", **cidr)
        assert cluster_egress is not None and cluster_egress >= 2  # cluster_egress_ips: 2
        pods = len([p for p in layout_.pods if p.cluster == c.id])
        # the exported ClusterIP service's and, through the headless one, each pod's
        assert value(s, "submariner_global_ingress_IP_allocated", **cidr) == 1 + pods
        assert value(s, "magw_globalnet_allocations_total") >= allocated  # type: ignore[operator]


def test_a_gateways_failure_shows_in_every_prober_and_the_vip_moves(lab: tuple[LabLayout, LabState, float],
                                                                    magw_cli: MagwCli) -> None:  # fmt: skip
    """The gateway holding the VIP shop (gw1 or gw2: the election is keepalived's, not always the first candidate
    on a loaded machine) loses power: the nodes that probe it (west's gateways, east's worker) count a failover
    with its detection time and replace their groups; west's gateways show its connection in error; the VIP
    moves to the other candidate and the egress controller counts the holder change. Then it recovers and every
    connection is connected again."""
    layout_, st, _before = lab
    held = poll_for("one holder of the VIP shop", lambda: kernel_holders(layout_)["shop"], lambda h: len(h) == 1)
    victim = held[0]
    probers = [layout_.node(n) for n in ("west-gw1", "west-gw2", "east-w1")]
    east = layout_.cluster("east")
    before = {n.name: scrape(n.namespace, ROUTE_AGENT_METRICS_PORT)[1] for n in probers}
    holder_changes = value(scrape(east.underlay_ns, EGRESS_METRICS_PORT)[1], "magw_egress_vip_holder_changes_total",
                           vip="shop") or 0  # fmt: skip
    assert holder_changes >= 1  # the victim became the holder at start
    magw_cli.lab("fail", victim, "--name", st.name)
    try:
        def called_down() -> bool:
            return all((value(scrape(n.namespace, ROUTE_AGENT_METRICS_PORT)[1], "magw_path_up", peer=victim)
                        == 0) for n in probers)  # fmt: skip
        poll(f"{victim} down in every prober's metrics", called_down, limit=60.0)
        for n in probers:
            s = scrape(n.namespace, ROUTE_AGENT_METRICS_PORT)[1]
            old = before[n.name]
            what = "alive"
            assert (value(s, "magw_failovers_total", peer=victim, what=what) or 0) > \
                (value(old, "magw_failovers_total", peer=victim, what=what) or 0), n.name  # fmt: skip
            count = value(s, "magw_failover_detection_seconds_count", peer_cluster="east") or 0
            total = value(s, "magw_failover_detection_seconds_sum", peer_cluster="east") or 0
            old_count = value(old, "magw_failover_detection_seconds_count", peer_cluster="east") or 0
            old_total = value(old, "magw_failover_detection_seconds_sum", peer_cluster="east") or 0
            assert count > old_count and 0 < (total - old_total) / (count - old_count) < 10.0, n.name
            replaces = value(s, "magw_nexthop_group_replaces_total") or 0
            assert replaces > (value(old, "magw_nexthop_group_replaces_total") or 0), n.name
            # the shortcut's replace, or an event's sync when a sync was running at the verdict (docs/health.md)
            assert sum(value(s, "magw_nexthop_group_sync_seconds_count", mode=m) or 0
                       for m in ("shortcut", "partial")) > 0  # fmt: skip
            if n.public_ip is not None:
                assert value(s, "submariner_connections", remote_hostname=victim, status="error") == 1
                assert value(s, "submariner_connection_established_timestamp", remote_hostname=victim) is None
        poll("the egress controller counts shop's holder change",
             lambda: (value(scrape(east.underlay_ns, EGRESS_METRICS_PORT)[1], "magw_egress_vip_holder_changes_total",
                            vip="shop") or 0) > holder_changes, limit=60.0)  # fmt: skip
    finally:
        magw_cli.lab("recover", victim, "--name", st.name)
    for g in ("west-gw1", "west-gw2"):
        poll(f"{g}: both connections connected again", _connected(layout_, g), limit=120.0)
