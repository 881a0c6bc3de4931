"""A pod's network for the lab kubelet: a namespace of its own, wired as the lab wires its static pods.

Slot ``k`` of a node (0..SLOTS-1) is the namespace ``<lab>-<cluster>-<node>-k<k>`` (with the lab's marker, so
``magw lab down`` removes it as any lab namespace), its ``eth0`` the peer of ``k<k>`` on the node's ``cni0``
(hairpin on, as the lab's pods) and the address ``<node's pod subnet> + FIRST_HOST + k`` with a default route via
``cni0``. The static pods take the low addresses of the subnet (``magw.lab.spec.layout``), these the high ones.
A ``hostNetwork`` pod has no sandbox: it runs in the node's namespace with the node's IP.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address

import attrs

from magw.lab.build import netns
from magw.lab.errors import LabError
from magw.lab.spec import naming
from magw.lab.spec.layout import NodeLayout

SLOTS = 50
FIRST_HOST = 200  # slot 0 is .200 of the node's /24


@attrs.frozen(kw_only=True)
class Sandbox:
    node: NodeLayout
    slot: int | None  # None: hostNetwork, the node's own namespace
    namespace: str
    ip: IPv4Address


def host_network(node: NodeLayout) -> Sandbox:
    return Sandbox(node=node, slot=None, namespace=node.namespace, ip=node.node_ip)


def sandbox_ns(lab: str, node: NodeLayout, slot: int) -> str:
    return f"{naming.ns_prefix(lab)}{node.cluster}-{node.short}-k{slot}"


def free_slot(used: Iterable[int], after: int = -1) -> int:
    """The first slot not in ``used`` after ``after`` (round the ring): addresses are not reused at once."""
    taken = set(used)
    for k in range(1, SLOTS + 1):
        slot = (after + k) % SLOTS
        if slot not in taken:
            return slot
    raise LabError(f"the node runs {SLOTS} kubelet pods already")


def create(lab: str, marker: str, node: NodeLayout, slot: int, mtu: int) -> Sandbox:
    """The namespace, veth and address of ``slot``; removed again if any step fails."""
    ns = sandbox_ns(lab, node, slot)
    ip = node.pod_subnet.network_address + FIRST_HOST + slot
    host_if = f"k{slot}"
    netns.add_namespace(ns, lo_alias=marker)
    try:
        netns.ip_batch(node.namespace, [
            f"link add {host_if} mtu {mtu} type veth peer name {naming.POD_IF} mtu {mtu} netns {ns}",
            f"link set {host_if} master {naming.CNI_BRIDGE}",
            f"link set {host_if} type bridge_slave hairpin on",
            f"link set {host_if} up",
        ])  # fmt: skip
        netns.ip_batch(ns, [
            f"addr add {ip}/{node.pod_subnet.prefixlen} dev {naming.POD_IF}",
            f"link set {naming.POD_IF} up",
            f"route add default via {node.cni_ip} dev {naming.POD_IF}",
        ])  # fmt: skip
    except LabError:
        netns.delete_namespace(ns)
        raise
    forget(node, ip)
    return Sandbox(node=node, slot=slot, namespace=ns, ip=ip)


def forget(node: NodeLayout, ip: IPv4Address) -> None:
    """Drop the node's neighbour entry of ``ip``: a reused address must not go to the MAC of the pod that had it
    before (a CNI's bridge plugin sends a gratuitous ARP for the same reason)."""
    netns.run(["ip", "-n", node.namespace, "neigh", "flush", "to", str(ip), "dev", naming.CNI_BRIDGE])


def remove(box: Sandbox) -> None:
    """Delete the sandbox's namespace (its veth goes with it); a hostNetwork pod has none."""
    if box.slot is not None:
        netns.delete_namespace(box.namespace)
