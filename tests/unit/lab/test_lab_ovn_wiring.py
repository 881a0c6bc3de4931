"""``--cni ovn``'s pure parts: the nodes' wiring, their OVN addresses, the route agents' flags and the syncer's host.

The lab carries packets through OVN (``magw.lab.planes.ovn_nodes``): no cni0 and no pod routes on the nodes, a
second underlay leg for OVN's tunnels, the management port at the node subnet's last host address with the
subnet's .1 (the ``rtos-`` router port) as its next hop. Expected values are written out from docs/lab.md's
addressing, not computed with the code under test.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface
from pathlib import Path

import attrs
import pytest

from magw.daemons.route_agent import main as route_agent
from magw.lab.build import wiring
from magw.lab.build.state import LabState
from magw.lab.errors import LabError, LabInputError
from magw.lab.planes import ovn as lab_ovn
from magw.lab.planes import ovn_nodes
from magw.lab.planes.daemons import broker_documents, route_agent_argv
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import default_topology, parse_topology


def _lab():  # type: ignore[no-untyped-def]
    return layout("magw", default_topology())


def test_an_ovn_node_has_no_cni0_no_pod_routes_and_a_tunnel_leg() -> None:
    lab = _lab()
    east = lab.clusters[0]
    cmds = wiring.node_commands(lab, east, east.nodes[0], ovn=True)
    assert "link add eth1 mtu 1500 type veth peer name gw1-ovn mtu 1500 netns magw-east-ul" in cmds
    assert "link set eth1 up" in cmds
    assert not any("cni0" in c for c in cmds)
    assert not any(c.startswith("route") for c in cmds)
    # the pods' veths: 100 bytes below the underlay for geneve, not on any bridge (ovn_nodes puts them on br-int)
    pods = [c for c in cmds if c.startswith("link add p")]
    assert pods == [
        "link add p1 mtu 1400 type veth peer name eth0 mtu 1400 netns magw-east-gw1-p1",
        "link add p2 mtu 1400 type veth peer name eth0 mtu 1400 netns magw-east-gw1-p2",
    ]
    assert not any("master" in c for c in cmds)
    # the generic lab is unchanged: cni0, its pods on it, routes to the other nodes
    generic = wiring.node_commands(lab, east, east.nodes[0])
    assert "link set p1 master cni0" in generic and not any("eth1" in c for c in generic)


def test_the_underlay_bridge_gets_both_legs_of_every_ovn_node() -> None:
    east = _lab().clusters[0]
    assert wiring.underlay_ports(east, ovn=True) == [
        "gw1", "gw2", "w1", "w2", "gw1-ovn", "gw2-ovn", "w1-ovn", "w2-ovn",
    ]  # fmt: skip
    assert wiring.underlay_ports(east) == ["gw1", "gw2", "w1", "w2"]


def test_ovn_addresses_of_a_node() -> None:
    lab = _lab()
    east, west = lab.clusters
    gw1, w1 = east.nodes[0], west.nodes[2]
    assert ovn_nodes.encap_ip(east, gw1) == IPv4Interface("172.17.1.11/24")  # node IP 172.17.0.11, next /24
    assert ovn_nodes.encap_ip(west, w1) == IPv4Interface("172.18.1.101/24")
    assert ovn_nodes.mgmt_ip(gw1) == IPv4Address("10.1.1.254")  # the pods start at .2
    assert ovn_nodes.mgmt_nexthop(gw1) == IPv4Address("10.1.1.1")
    assert ovn_nodes.chassis_name(w1) == "chassis-west-w1"


def test_the_broker_gives_ovn_nodes_their_management_address_as_cni_ip() -> None:
    """The route agents route the host's traffic to remote clusters from ``cni_ip`` (table 150's source): on OVN
    that is ovn-k8s-mp0's address, the only address of the node in the pod network."""
    lab = _lab()
    ovn = broker_documents(lab, "ovn")["node-east-east-w1.yaml"]
    generic = broker_documents(lab)["node-east-east-w1.yaml"]
    assert (ovn["cni_ip"], generic["cni_ip"]) == ("10.1.3.254", "10.1.3.1")


def test_route_agent_flags_and_the_hosted_syncer() -> None:
    lab = _lab()
    st = LabState(name="magw", topology=default_topology(), phase="up", daemons=True, token="t")
    east = lab.clusters[0]
    gw1, w1, w2 = east.nodes[0], east.nodes[2], east.nodes[3]
    assert ovn_nodes.route_agent_flags(st, w1) == ["--ovn-mgmt-nexthop", "10.1.3.1"]
    gw_flags = ovn_nodes.route_agent_flags(st, gw1)
    assert gw_flags[:2] == ["--ovn-mgmt-nexthop", "10.1.1.1"]
    assert gw_flags[2:] == ["--ovs-db", f"unix:{st.dir}/ovs/east-gw1/db.sock", "--ovs-datapath-type", "netdev"]
    # the first worker's route agent hosts the syncer (its probes of the gateways drive the failover); only it
    assert lab_ovn.syncer_host(east) == w1
    hosted = lab_ovn.hosted_syncer_flags(st, east, w1)
    assert hosted[::2] == ["--ovn-nb", "--ovn-sb", "--ovn-status-file"]
    assert hosted[1] == f"unix:{st.dir}/ovn/east/nb.sock"
    assert lab_ovn.hosted_syncer_flags(st, east, w2) == [] == lab_ovn.hosted_syncer_flags(st, east, gw1)


def test_a_cluster_without_workers_keeps_a_standalone_syncer() -> None:
    """A gateway hosting the syncer would take it down with it: no host, ``magw ovn sync`` runs instead."""
    topo = parse_topology({"clusters": [{"id": "east", "gateways": 2, "workers": 0}, {"id": "west"}]})
    lab = layout("magw", topo)
    assert lab_ovn.syncer_host(lab.clusters[0]) is None
    assert lab_ovn.syncer_host(lab.clusters[1]) is not None


def test_every_ovn_node_snats_what_its_host_sends_into_ovn_by_the_management_port() -> None:
    """OVN-Kubernetes' "OVN SNAT to Management Port": the host's packets into OVN by ovn-k8s-mp0 leave with the
    port's address (a remote client routed that way, not by table 149, is hidden from the pod)."""
    gw1 = _lab().clusters[0].nodes[0]
    script = ovn_nodes.mgmt_snat_script(gw1)
    assert "type nat hook postrouting priority srcnat;" in script
    assert 'oifname "ovn-k8s-mp0" snat to 10.1.1.254 ' in script


def test_on_the_kube_control_plane_every_cluster_needs_a_worker_to_host_its_syncer() -> None:
    """The standalone ``magw ovn sync`` follows the file broker only: a kube OVN lab refuses a cluster whose
    syncer no worker's route agent could host; the file broker takes it."""
    topo = parse_topology({"clusters": [{"id": "east", "gateways": 2, "workers": 0}, {"id": "west"}]})
    lab = layout("magw", topo)
    with pytest.raises(LabInputError) as err:
        lab_ovn.check_supported(lab, "kube")
    assert str(err.value) == (
        "--cni ovn --control-plane kube: cluster east has no worker to host its OVN syncer (a worker's route agent "
        "follows the API server; the standalone magw ovn sync, the file broker only)"
    )
    for lab_, plane in ((lab, "file"), (_lab(), "kube")):  # accepted (LabError only if OVN's tools are missing)
        try:
            lab_ovn.check_supported(lab_, plane)
        except LabError as exc:
            assert "--cni ovn: " in str(exc)


def test_a_kube_ovn_route_agent_publishes_its_management_port_and_hosts_the_syncer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its Node's ``submariner.io/cniIfaceIp`` comes from ``ovn-k8s-mp0`` (no cni0 on an OVN node); the first
    worker's agent reads the API server and hosts the syncer, which its source feeds."""
    monkeypatch.setattr("magw.lab.planes.daemons.script", lambda name: Path("/bin") / name)
    st = LabState(name="magw", topology=default_topology(), phase="up", daemons=True, token="t",
                  control_plane="kube", cni="ovn")  # fmt: skip
    lab = _lab()
    w1 = lab.node("east-w1")
    args = route_agent.build_parser().parse_args(route_agent_argv(st, w1)[1:])
    assert (args.source, args.cni_interface) == ("kube", "ovn-k8s-mp0")
    assert args.ovn_nb == f"unix:{st.dir}/ovn/east/nb.sock" and args.broker_dir is None
    generic = attrs.evolve(st, cni="generic")
    assert route_agent.build_parser().parse_args(route_agent_argv(generic, w1)[1:]).cni_interface == "cni0"
