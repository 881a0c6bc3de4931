"""The egress gateway on OVN (pure): per node with bound pods, an address set of them and one reroute policy into
that node's management port; nothing for unbound pods, nothing without a VIP, nothing that names the holder.

The oracle is written out by hand from the world below (which pod is bound, on which node, which ``cni_ip``)."""

from __future__ import annotations

from ipaddress import IPv4Address

import attrs

from magw.desired.ovn.egress import EGRESS_ALLOW_PRIORITY, EGRESS_PRIORITY, EXCLUDED_SET, node_set_name
from magw.desired.ovn.planner import OvnInputs, plan_ovn
from magw.desired.ovn.rows import AddressSet, Policy
from magw.desired.ovn.topology import CLUSTER_ROUTER, POLICY_PRIORITY
from magw.model import Cni, Snapshot
from magw.model.egressgw import EgressBinding, EgressGateway, EgressVIP
from magw.model.globalnet import Globalnet, Pod, PodPhase, Service
from tests.support.ovn_snapshots import chassis_of, east_snapshot

GATEWAYS = ("gw1", "gw2")
# east_snapshot's cni_ip: node1 10.128.0.2, node2 10.128.1.2, gw1 10.128.2.2, gw2 10.128.3.2.
PODS = (
    Pod(namespace="shop", name="web-1", ip=IPv4Address("10.128.0.10"), labels={"app": "web"}, node="node1"),
    Pod(namespace="shop", name="web-2", ip=IPv4Address("10.128.1.10"), labels={"app": "web"}, node="node2"),
    Pod(namespace="shop", name="web-3", ip=IPv4Address("10.128.1.11"), labels={"app": "web"}, node="node2"),
    Pod(namespace="shop", name="web-4", ip=IPv4Address("10.128.1.12"), labels={"app": "web"}, node="node2",
        phase=PodPhase.PENDING),
    Pod(namespace="other", name="db-1", ip=IPv4Address("10.128.0.20"), labels={"app": "db"}, node="node1"),
    Pod(namespace="shop", name="lost", ip=IPv4Address("10.128.0.30"), labels={"app": "web"}, node="gone"),
)
SERVICES = (
    Service(namespace="shop", name="web", selector={"app": "web"}),
    Service(namespace="other", name="db", selector={"app": "db"}),
)
VIP = EgressVIP(name="shop", vip=IPv4Address("172.18.0.200"), vrid=7, candidates=GATEWAYS,
                bindings=(EgressBinding(namespace="shop"),))  # fmt: skip


def _snapshot(*, vips: tuple[EgressVIP, ...] = (VIP,), down: tuple[str, ...] = ()) -> Snapshot:
    base = east_snapshot(GATEWAYS, down=down)
    return attrs.evolve(
        base,
        config=attrs.evolve(base.config, cni=Cni.OVN),
        globalnet=Globalnet(pods=PODS, services=SERVICES),
        egressgw=EgressGateway(vips=vips),
    )


def _egress(snapshot: Snapshot) -> tuple[dict[str, AddressSet], list[Policy]]:
    state = plan_ovn(snapshot, OvnInputs(chassis=chassis_of(GATEWAYS))).state
    sets = {s.name: s for s in state.address_sets if s.name.startswith("magw_egress")}
    return sets, [p for p in state.policies if p.priority in (EGRESS_PRIORITY, EGRESS_ALLOW_PRIORITY)]


def test_each_node_with_bound_pods_reroutes_them_into_its_own_management_port() -> None:
    sets, policies = _egress(_snapshot())
    assert sets[node_set_name("node1")].addresses == ("10.128.0.10",)
    assert sets[node_set_name("node2")].addresses == ("10.128.1.10", "10.128.1.11")  # web-4 is not Running
    assert set(sets) == {EXCLUDED_SET, "magw_egress_node1", "magw_egress_node2"}  # db-1 unbound; "gone" unknown
    assert sorted((p.priority, p.match, p.action, p.nexthops) for p in policies if p.router == CLUSTER_ROUTER) == [
        (19000, "ip4.src == $magw_egress_node1", "reroute", ("10.128.0.2",)),
        (19000, "ip4.src == $magw_egress_node2", "reroute", ("10.128.1.2",)),
        (19001, "ip4.src == $magw_egress_node1 && ip4.dst == $magw_egress_excluded", "allow", ()),
        (19001, "ip4.src == $magw_egress_node2 && ip4.dst == $magw_egress_excluded", "allow", ()),
    ]
    assert len(policies) == 4


def test_the_excluded_set_keeps_cluster_and_remote_destinations_out_but_not_nodes() -> None:
    """Node addresses are not excluded in OVN: a bound pod's packet to a node goes to its own host first (as
    OVN-Kubernetes' policy 1004 sends it), whose kernel datapath does not steer it."""
    sets, _ = _egress(_snapshot())
    assert set(sets[EXCLUDED_SET].addresses) == {
        "10.128.0.0/14", "10.96.0.0/16",  # east's pods and services
        "10.200.0.0/16", "10.201.0.0/16",  # west's
        "169.254.0.0/16", "224.0.0.0/3",  # link-local, multicast
    }  # fmt: skip


def test_no_match_negates_a_set() -> None:
    """ovn-controller 23.03 expands ``!= $set`` of prefixes exponentially (it was OOM-killed in the lab)."""
    _, policies = _egress(_snapshot())
    assert policies and not any("!=" in p.match for p in policies)


def test_remote_clusters_keep_their_higher_priority_reroute() -> None:
    state = plan_ovn(_snapshot(), OvnInputs(chassis=chassis_of(GATEWAYS))).state
    assert {p.priority for p in state.policies} == {POLICY_PRIORITY, EGRESS_ALLOW_PRIORITY, EGRESS_PRIORITY}
    assert POLICY_PRIORITY > EGRESS_ALLOW_PRIORITY > EGRESS_PRIORITY


def test_a_failover_changes_no_egress_row() -> None:
    """The policies name the pod's node, never the VIP's holder, nor a gateway's health."""
    assert _egress(_snapshot()) == _egress(_snapshot(down=("gw1",)))


def test_no_vip_or_no_bound_pod_means_no_egress_row() -> None:
    assert _egress(_snapshot(vips=())) == ({}, [])
    unbound = attrs.evolve(VIP, bindings=(EgressBinding(namespace="nobody"),))
    assert _egress(_snapshot(vips=(unbound,))) == ({}, [])


def test_an_odd_node_name_gives_a_valid_ovn_name() -> None:
    assert node_set_name("node1") == "magw_egress_node1"
    odd = node_set_name("ip-10-0-0-1.ec2.internal")
    assert odd.startswith("magw_egress_ip_10_0_0_1.ec2.internal_") and odd != node_set_name("ip_10_0_0_1.ec2.internal")
