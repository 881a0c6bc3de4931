"""Two small clusters wired by hand in throwaway namespaces, for tests/kernel/test_dataplane.py.

    east: e-gw1, e-gw2 (gateways), e-w1 (worker, pod e-pod 10.1.3.10)
    west: w-gw1 (gateway), w-w1 (worker, pod w-pod 10.2.3.10)

A "switch" namespace holds three bridges: each cluster's underlay (172.18.0.0/24,
172.19.0.0/24) and the WAN between gateways (198.51.100.0/24). Each node is a
namespace with ``eth0`` on its underlay (and ``eth1`` on the WAN for gateways) and
a ``cni0`` holding its CNI IP; a pod is a namespace behind the worker's ``cni0``.
The CNI is host-gw style: nodes route other nodes' pod /24 via their underlay IP,
and masquerade pod traffic leaving the cluster (as real CNIs do) in a table of
their own. Node sysctls are set inside the node namespaces only: forwarding on,
loose reverse-path filtering (the return path of a flow may use another gateway,
as with Submariner, which sets rp_filter=2 too).
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.model import Cluster, Config, Endpoint, Node, Snapshot, Strategy
from tests.support.kernel_node import nft_script
from tests.support.netns import run

EAST = Cluster(id="east", pod_cidrs=[IPv4Network("10.1.0.0/16")], service_cidrs=[IPv4Network("100.1.0.0/16")])
WEST = Cluster(id="west", pod_cidrs=[IPv4Network("10.2.0.0/16")], service_cidrs=[IPv4Network("100.2.0.0/16")])


@attrs.frozen(kw_only=True)
class Host:
    """A node of the topology: its cluster, underlay IP, CNI IP, public IP (gateways) and pod IP (workers)."""

    name: str
    cluster: Cluster
    ip: str
    cni_ip: str
    public_ip: str | None = None
    pod_ip: str | None = None

    @property
    def gateway(self) -> bool:
        return self.public_ip is not None


HOSTS = (
    Host(name="e-gw1", cluster=EAST, ip="172.18.0.6", cni_ip="10.1.1.1", public_ip="198.51.100.6"),
    Host(name="e-gw2", cluster=EAST, ip="172.18.0.8", cni_ip="10.1.2.1", public_ip="198.51.100.8"),
    Host(name="e-w1", cluster=EAST, ip="172.18.0.3", cni_ip="10.1.3.1", pod_ip="10.1.3.10"),
    Host(name="w-gw1", cluster=WEST, ip="172.19.0.4", cni_ip="10.2.1.1", public_ip="198.51.100.4"),
    Host(name="w-w1", cluster=WEST, ip="172.19.0.3", cni_ip="10.2.3.1", pod_ip="10.2.3.10"),
)

CNI_MASQUERADE = """
table ip cni {{
  chain post {{
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr {pods} ip daddr != {pods} masquerade
  }}
}}
"""


def snapshot(local: Cluster, strategy: Strategy) -> Snapshot:
    """The clusterset as ``local`` sees it: its own nodes, every gateway as an endpoint."""
    return Snapshot(
        local_cluster=local.id,
        clusters=(EAST, WEST),
        nodes=[
            Node(name=h.name, ip=IPv4Address(h.ip), cni_ip=IPv4Address(h.cni_ip), gateway=h.gateway)
            for h in HOSTS
            if h.cluster == local
        ],
        endpoints=[
            Endpoint(
                cluster=h.cluster.id,
                hostname=h.name,
                private_ip=IPv4Address(h.ip),
                public_ip=IPv4Address(h.public_ip),
            )
            for h in HOSTS
            if h.public_ip is not None
        ],
        config=Config(strategy=strategy),
    )


@attrs.frozen(kw_only=True)
class Topology:
    """Namespace names: ``nodes[host name]``, ``pods[host name]`` (workers only), and the switch."""

    switch: str
    nodes: dict[str, str]
    pods: dict[str, str]


def _veth(a_ns: str, a_name: str, b_ns: str, b_name: str) -> None:
    """A veth pair with end ``a_name`` in ``a_ns`` and ``b_name`` in ``b_ns``, both up."""
    run(a_ns, "ip", "link", "add", a_name, "type", "veth", "peer", "name", b_name, "netns", b_ns)
    run(a_ns, "ip", "link", "set", a_name, "up")
    run(b_ns, "ip", "link", "set", b_name, "up")


def _switch(ns: str) -> None:
    for bridge in ("br-east", "br-west", "br-wan"):
        run(ns, "ip", "link", "add", bridge, "type", "bridge")
        run(ns, "ip", "link", "set", bridge, "up")


def _plug(switch: str, bridge: str, port: str, node_ns: str, dev: str, address: str) -> None:
    _veth(switch, port, node_ns, dev)
    run(switch, "ip", "link", "set", port, "master", bridge)
    run(node_ns, "ip", "addr", "add", address, "dev", dev)


def _node_sysctls(ns: str) -> None:
    for key, value in (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "2")):
        run(ns, "sysctl", "-q", "-w", f"{key}={value}")


def _wire_node(top: Topology, host: Host, index: int) -> None:
    ns = top.nodes[host.name]
    _node_sysctls(ns)
    _plug(top.switch, f"br-{host.cluster.id}", f"u{index}", ns, "eth0", f"{host.ip}/24")
    if host.public_ip is not None:
        _plug(top.switch, "br-wan", f"w{index}", ns, "eth1", f"{host.public_ip}/24")
    if host.pod_ip is None:
        run(ns, "ip", "link", "add", "cni0", "type", "veth", "peer", "name", "cni0p")
        run(ns, "ip", "link", "set", "cni0p", "up")
        run(ns, "ip", "link", "set", "cni0", "up")
    else:
        pod = top.pods[host.name]
        _veth(ns, "cni0", pod, "eth0")
        run(pod, "ip", "addr", "add", f"{host.pod_ip}/24", "dev", "eth0")
        run(pod, "ip", "route", "add", "default", "via", host.cni_ip)
    run(ns, "ip", "addr", "add", f"{host.cni_ip}/24", "dev", "cni0")
    pods = ", ".join(str(n) for n in host.cluster.pod_cidrs)
    nft_script(ns, CNI_MASQUERADE.format(pods=f"{{ {pods} }}"))


def _cni_routes(top: Topology) -> None:
    """host-gw: every node routes each other node's pod /24 (workers here) via that node's underlay IP."""
    for host in HOSTS:
        for other in HOSTS:
            if other.cluster == host.cluster and other.pod_ip is not None and other is not host:
                pod_net = IPv4Network(f"{other.pod_ip}/24", strict=False)
                run(top.nodes[host.name], "ip", "route", "add", str(pod_net), "via", other.ip)


def build(new_ns: Callable[[str], str]) -> Topology:
    """Create and wire every namespace (``new_ns(prefix)`` makes one that is removed after the test)."""
    top = Topology(
        switch=new_ns("magwt-sw"),
        nodes={h.name: new_ns(f"magwt-{h.name}") for h in HOSTS},
        pods={h.name: new_ns(f"magwt-pod-{h.name}") for h in HOSTS if h.pod_ip is not None},
    )
    _switch(top.switch)
    for index, host in enumerate(HOSTS):
        _wire_node(top, host, index)
    _cni_routes(top)
    return top
