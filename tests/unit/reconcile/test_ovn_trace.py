"""Packet paths through the real OVN pipeline: our syncer writes the NB, the real ovn-northd compiles it, and
``ovn-trace`` follows a packet through the logical flows in the SB. Assertions read the trace's text (the
datapaths it entered, the ports it left by, the next hops routing chose) and the SB's port bindings: never our
own rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest

from magw.model import Snapshot
from magw.reconcile.ovnsync import sync_ovn
from tests.support.ovn_fixture import OvnDbs, OvnkTopo, Trace, build_ovnk, microflow, ovn_trace, port_chassis, wait_sb
from tests.support.ovn_snapshots import east_snapshot

pytestmark = pytest.mark.ovn

NODES = ("node1", "node2", "gw1", "gw2", "gw3")
REMOTE_POD = "10.200.3.7"
REMOTE_SERVICE = "10.201.0.10"
REMOTE_GLOBAL = "242.1.0.9"


@pytest.fixture
def topo(ovn_dbs: OvnDbs) -> Iterator[OvnkTopo]:
    yield build_ovnk(ovn_dbs, nodes=NODES)


def sync(dbs: OvnDbs, snapshot: Snapshot) -> None:
    from magw.drivers.ovn import connect

    with closing(connect(dbs.nb, dbs.sb)) as driver:
        result = sync_ovn(driver, snapshot)
    assert result.ok, result.error
    wait_sb(dbs)


def _router_mac(topo: OvnkTopo, node: str) -> str:
    ip = topo.node_subnets[node].network_address + 1
    return "0a:58:" + ":".join(f"{b:02x}" for b in ip.packed)


def from_pod(
    dbs: OvnDbs, topo: OvnkTopo, dst: str, node: str = "node1", sport: int = 40000, select_id: int | None = None
) -> Trace:
    pod = f"default_pod-{node}"
    _, mac, ip = topo.pods[pod]
    return ovn_trace(dbs, node, microflow(pod, mac, _router_mac(topo, node), ip, dst, sport=sport), select_id=select_id)


def from_remote(dbs: OvnDbs, uplink: str, localnet: str, router_mac: str, src: str, dst: str, dport: int) -> Trace:
    flow = (
        f'inport == "{localnet}" && eth.src == 02:00:a9:fe:fe:0a && eth.dst == {router_mac} && ip4.src == {src} && '
        f"ip4.dst == {dst} && ip.ttl == 64 && tcp && tcp.src == 33000 && tcp.dst == {dport}"
    )
    return ovn_trace(dbs, uplink, flow)


def _left_by(trace: Trace) -> str:
    """The gateway router a packet crossed toward the host (exactly one)."""
    routers = [d for d in trace.datapaths if d.startswith("submariner_router")]
    assert len(routers) == 1, trace.text
    return routers[0]


def test_pod_to_remote_pod_and_service_leaves_through_submariner_router_on_the_gateway_chassis(
    ovn_dbs: OvnDbs, topo: OvnkTopo
) -> None:
    sync(ovn_dbs, east_snapshot(gateways=("gw2",), multi_active=False))
    for dst in (REMOTE_POD, REMOTE_SERVICE):
        t = from_pod(ovn_dbs, topo, dst)
        assert t.datapaths[:3] == ["node1", "ovn_cluster_router", "submariner_join"], t.text
        assert _left_by(t) == "submariner_router"
        assert t.next_hops[-1] == "169.254.254.10"  # the gateway host's ovn-k8s-sub0
        assert t.last_output == ("submariner_gateway_localnet", "localnet")  # out to br-submariner
        # The router is an l3gateway router bound to gw2's chassis: its join port's binding says where.
        entered = [p for p, kind in t.outputs if kind == "l3gateway"]
        assert entered and {port_chassis(ovn_dbs, p) for p in entered} == {"chassis-gw2"}


def test_local_traffic_is_not_rerouted(ovn_dbs: OvnDbs, topo: OvnkTopo) -> None:
    sync(ovn_dbs, east_snapshot(gateways=("gw1",)))
    t = from_pod(ovn_dbs, topo, str(topo.pods["default_pod-node2"][2]))
    assert "submariner_join" not in t.datapaths
    assert t.last_output == ("default_pod-node2", "")


def test_packet_from_a_remote_cluster_reaches_the_local_pod_and_service(ovn_dbs: OvnDbs, topo: OvnkTopo) -> None:
    sync(ovn_dbs, east_snapshot(gateways=("gw1",)))
    up_mac = "00:60:2f:10:01:04"
    pod = "default_pod-node2"
    t = from_remote(
        ovn_dbs, "submariner_gateway", "submariner_gateway_localnet", up_mac, REMOTE_POD, topo.pods[pod][2], 8080
    )
    assert t.datapaths == ["submariner_gateway", "submariner_router", "submariner_join", "ovn_cluster_router", "node2"]
    assert t.last_output == (pod, "")
    # A local service's VIP: the cluster's load-balancer group on submariner_router picks the backend.
    t = from_remote(
        ovn_dbs, "submariner_gateway", "submariner_gateway_localnet", up_mac, REMOTE_POD, topo.service_vip, 80
    )
    assert "ct_lb" in t.text
    assert t.last_output == ("default_pod-node1", "")  # the service's only backend


def test_globalnet_remote_global_cidr_leaves_through_submariner_router(ovn_dbs: OvnDbs, topo: OvnkTopo) -> None:
    sync(ovn_dbs, east_snapshot(gateways=("gw1",), globalnet=True))
    t = from_pod(ovn_dbs, topo, REMOTE_GLOBAL)
    assert _left_by(t) == "submariner_router"
    assert t.next_hops[-1] == "169.254.254.10"
    assert t.last_output == ("submariner_gateway_localnet", "localnet")
    # The remote cluster's pod CIDR is the same as ours with Globalnet: a pod IP stays local.
    t = from_pod(ovn_dbs, topo, str(topo.pods["default_pod-node2"][2]))
    assert "submariner_join" not in t.datapaths


def _routers_by_bucket(dbs: OvnDbs, topo: OvnkTopo, buckets: int) -> dict[int, str]:
    return {b: _left_by(from_pod(dbs, topo, REMOTE_POD, select_id=b)) for b in range(1, buckets + 1)}


def test_several_gateways_carry_traffic_and_a_failed_one_carries_none(ovn_dbs: OvnDbs, topo: OvnkTopo) -> None:
    sync(ovn_dbs, east_snapshot())
    t = from_pod(ovn_dbs, topo, REMOTE_POD)
    assert "select(1=100, 2=100, 3=100)" in t.text, t.text  # one ECMP bucket per gateway
    by_bucket = _routers_by_bucket(ovn_dbs, topo, 3)
    assert sorted(by_bucket.values()) == ["submariner_router", "submariner_router_2", "submariner_router_3"]
    chassis = {
        r: port_chassis(ovn_dbs, f"submariner_j_lsp{r.removeprefix('submariner_router')}") for r in by_bucket.values()
    }
    assert chassis == {
        "submariner_router": "chassis-gw1",
        "submariner_router_2": "chassis-gw2",
        "submariner_router_3": "chassis-gw3",
    }
    # gw2 fails: the health view takes it down; after the sync no bucket leads through its router.
    sync(ovn_dbs, east_snapshot(down=("gw2",)))
    after = _routers_by_bucket(ovn_dbs, topo, 2)
    assert sorted(after.values()) == ["submariner_router", "submariner_router_3"]
    t = from_pod(ovn_dbs, topo, REMOTE_POD)
    assert "select(1=100, 2=100)" in t.text, t.text
    # Without --select-id ovn-trace picks a bucket at random: whatever it picks, never gw2's router.
    assert all(
        _left_by(from_pod(ovn_dbs, topo, REMOTE_POD, sport=40000 + i)) != "submariner_router_2" for i in range(8)
    )
