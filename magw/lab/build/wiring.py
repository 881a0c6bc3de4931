"""The lab's network as ``ip`` batch commands per namespace (pure: layout in, command lines out).

Order of use (``magw.lab.build.lifecycle``): every namespace exists first; then
``bridge_commands`` for the underlay and WAN namespaces, ``node_commands`` for
every node (it creates the node's veths with their peers directly in the
bridge and pod namespaces), ``port_commands`` to enslave the peers, and
``pod_commands`` to address the pods.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address

from magw.lab.spec import naming
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout, PodLayout

# Inside every lab namespace. IPv6 is off so no router solicitations, MLD or DAD
# packets show up on the tunnels' counters (the demo and tests count packets).
BASE_SYSCTLS: dict[str, str] = {
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
}
# Inside node namespaces only: nodes route (pods, tunnels) and see asymmetric paths across gateways.
NODE_SYSCTLS: dict[str, str] = {
    **BASE_SYSCTLS,
    "net.ipv4.ip_forward": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}


def bridge_commands(mtu: int) -> list[str]:
    """The bridge of an underlay or WAN namespace."""
    return [f"link add {naming.BRIDGE} mtu {mtu} type bridge", f"link set {naming.BRIDGE} up"]


# --cni ovn: the pods' (and ovn-k8s-mp0's) MTU leaves room for OVN's geneve header (58 bytes) on the underlay.
OVN_POD_MTU_ROOM = 100


def pod_mtu(lab: LabLayout, ovn: bool) -> int:
    return lab.topology.underlay_mtu - OVN_POD_MTU_ROOM if ovn else lab.topology.underlay_mtu


def node_commands(lab: LabLayout, cluster: ClusterLayout, node: NodeLayout, *, ovn: bool = False) -> list[str]:
    """Everything inside a node namespace: underlay veth, cni0 with the pods' veths, WAN veth, pod routes.

    ``ovn``: no cni0 and no pod routes (OVN carries pods' packets: ``magw.lab.planes.ovn_nodes`` puts the pods'
    veths on ``br-int``), and a second underlay leg, ``eth1``, for the node's ``br-phy`` (OVN's tunnels)."""
    mtu = lab.topology.underlay_mtu
    ul_port = naming.underlay_port(node.short)
    cmds = [
        f"link add {naming.UNDERLAY_IF} address {link_mac(node.node_ip)} mtu {mtu} type veth peer name {ul_port} "
        f"mtu {mtu} netns {cluster.underlay_ns}",
        f"addr add {node.node_ip}/{cluster.underlay.prefixlen} dev {naming.UNDERLAY_IF}",
        f"link set {naming.UNDERLAY_IF} up",
    ]
    if ovn:
        enc = naming.encap_port(node.short)
        cmds += [
            f"link add {naming.ENCAP_IF} mtu {mtu} type veth peer name {enc} mtu {mtu} netns {cluster.underlay_ns}",
            f"link set {naming.ENCAP_IF} up",
        ]
    else:
        cmds += [
            f"link add {naming.CNI_BRIDGE} mtu {mtu} type bridge",
            f"addr add {node.cni_ip}/{node.pod_subnet.prefixlen} dev {naming.CNI_BRIDGE}",
            f"link set {naming.CNI_BRIDGE} up",
        ]
    pmtu = pod_mtu(lab, ovn)
    for pod in cluster.pods_of(node.name):
        cmds.append(
            f"link add {pod.host_if} mtu {pmtu} type veth peer name {naming.POD_IF} mtu {pmtu} netns {pod.namespace}"
        )
        if not ovn:
            cmds.append(f"link set {pod.host_if} master {naming.CNI_BRIDGE}")
            cmds.append(f"link set {pod.host_if} type bridge_slave hairpin on")
        cmds.append(f"link set {pod.host_if} up")
    if node.wan_ip is not None:
        wan_port = naming.wan_port(node.cluster, node.short)
        cmds += [
            f"link add {naming.WAN_IF} address {link_mac(node.wan_ip)} mtu {mtu} type veth peer name {wan_port} "
            f"mtu {mtu} netns {lab.wan_ns}",
            f"addr add {node.wan_ip}/{lab.wan_subnet.prefixlen} dev {naming.WAN_IF}",
            f"link set {naming.WAN_IF} up",
        ]
    elif node.gateway and cluster.cloud is not None:  # behind the cloud: the WAN (and peered underlays) through it
        cmds.append(f"route add {lab.wan_subnet} via {cluster.cloud.underlay_ip} dev {naming.UNDERLAY_IF}")
        spec = lab.topology.load_balancer
        if spec is not None and spec.peered:
            others = [c.underlay for c in lab.clusters if c.id != cluster.id]
            cmds += [f"route add {u} via {cluster.cloud.underlay_ip} dev {naming.UNDERLAY_IF}" for u in others]
    if ovn:  # the node's routes into the pod network go through ovn-k8s-mp0 (magw.lab.planes.ovn_nodes)
        return cmds
    for other in cluster.nodes:
        if other.name != node.name:
            cmds.append(f"route add {other.pod_subnet} via {other.node_ip} dev {naming.UNDERLAY_IF}")
    # Lab nodes have no default route, but traffic a node sends to a ClusterIP is routed before the output
    # hook DNATs it (real nodes use their default route): give the local service range a route.
    cmds.append(f"route add {cluster.service_cidr} dev {naming.UNDERLAY_IF}")
    return cmds


def link_mac(ip: IPv4Address) -> str:
    """The MAC of a node's underlay or WAN link: ``02:1a`` (locally administered, unicast) and the link's address,
    so a node made again (``magw lab remove-gateway``, then ``add-gateway``) has the MAC its neighbours' ARP
    caches still hold, as a real node keeps its NIC. With a new random MAC the other nodes kept sending to the old
    one until their entries went stale (15-45 s): the new gateway's probes and VXLAN packets went nowhere."""
    return "02:1a:" + ":".join(f"{b:02x}" for b in ip.packed)


def port_commands(ports: Sequence[str]) -> list[str]:
    """Enslave the nodes' veth peers to the bridge of an underlay or WAN namespace."""
    cmds: list[str] = []
    for port in ports:
        cmds += [f"link set {port} master {naming.BRIDGE}", f"link set {port} up"]
    return cmds


def underlay_ports(cluster: ClusterLayout, *, ovn: bool = False) -> list[str]:
    ports = [naming.underlay_port(n.short) for n in cluster.nodes]
    if cluster.cloud is not None:
        ports.append(naming.underlay_port(naming.CLOUD_SHORT))
    return ports + [naming.encap_port(n.short) for n in cluster.nodes] if ovn else ports


def wan_ports(lab: LabLayout) -> list[str]:
    ports = [naming.wan_port(n.cluster, n.short) for n in lab.gateways if n.wan_ip is not None]
    return ports + [naming.wan_port(c.id, naming.CLOUD_SHORT) for c in lab.clusters if c.cloud is not None]


def pod_commands(pod: PodLayout, node: NodeLayout) -> list[str]:
    """A pod: its address in the node's /24 and a default route via the node's cni0 (with ``--cni ovn``, the same
    address is the node's ``rtos-`` port of ``ovn_cluster_router``)."""
    return [
        f"addr add {pod.ip}/{node.pod_subnet.prefixlen} dev {naming.POD_IF}",
        f"link set {naming.POD_IF} up",
        f"route add default via {node.cni_ip} dev {naming.POD_IF}",
    ]


def tbf_argv(namespace: str, rate: str, latency: str = "50ms") -> list[str]:
    """Shape a gateway's WAN egress with tbf; burst is 10 ms worth of the rate (at least 32 KiB).

    ``latency`` bounds tbf's queue (packets that would wait longer are dropped); a saturated link
    delays everything on it by up to that much, the gateways' health probes included.
    """
    burst = max(_rate_bits(rate) // 8 // 100, 32 * 1024)
    return ["tc", "-n", namespace, "qdisc", "replace", "dev", naming.WAN_IF, "root", "tbf",
            "rate", rate, "burst", str(burst), "latency", latency]  # fmt: skip


def _rate_bits(rate: str) -> int:
    for suffix, mult in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if rate.endswith(suffix):
            return int(rate[: -len(suffix)]) * mult
    raise ValueError(f"wan_rate: {rate!r} has no kbit/mbit/gbit unit")
