"""The egress gateway's rows in OVN (pure): each node's bound pods rerouted into that node's own host.

On OVN-Kubernetes a pod's packet to the outside never crosses its node's kernel routing (shared gateway mode:
``ovn_cluster_router`` to the node's ``GR_<node>``, SNAT there, out by ``br-ex``), so the egress datapath of
docs/egress-datapath.md would never see it. Per node that has pods bound to a VIP, two policies on
``ovn_cluster_router`` send them into the node's own management port (``ovn-k8s-mp0``, the Node's ``cni_ip``):

    19001  ip4.src == $magw_egress_<node> && ip4.dst == $magw_egress_excluded   allow
    19000  ip4.src == $magw_egress_<node>                                         reroute <node's cni_ip>

``magw_egress_<node>``: the node's bound pods; ``magw_egress_excluded``: destinations that are not the outside (the
cluster's and every remote cluster's CIDRs, link-local, multicast), routed as OVN would without us. From the
management port on, the packet takes the generic datapath unchanged: the steering mark, the rule, the GPE route
to the VIP's holder, which decapsulates and SNATs it to the VIP.

Two policies, as OVN-Kubernetes' EgressIP has allow policies above its reroute, not one with ``ip4.dst != $set``:
ovn-controller 23.03 expands the negation of a set of prefixes into flows whose number grows exponentially with the
set (in the lab, a dozen prefixes took it to 6 GB and the OOM killer). Node addresses are left out of the excluded
set: a bound pod's packet to a node goes to its own node's host first, as OVN-Kubernetes' own policy 1004 sends
it, and that host routes it (node addresses are in the kernel datapath's ``excluded`` set).

The policies name the pod's own node, never the VIP's holder: a failover changes no OVN row, as it changes no
kernel object. Their priorities are below the remote clusters' reroutes (20000): traffic to a remote cluster
keeps going to a gateway router whatever the egress binding; above OVN-Kubernetes' own (1005 at most; its older
releases' EgressFirewall router policies, 2000-10000, would not see bound pods: docs/egress-datapath.md).
"""

from __future__ import annotations

from collections import defaultdict
from ipaddress import IPv4Address

import attrs

from magw.desired.egressgw.node import egressgw_inputs
from magw.desired.egressgw.plan import excluded
from magw.desired.ovn.rows import AddressSet, Policy
from magw.desired.ovn.topology import set_name
from magw.model import Snapshot

EGRESS_PRIORITY = 19000
EGRESS_ALLOW_PRIORITY = 19001
EXCLUDED_SET = "magw_egress_excluded"


def node_set_name(node: str) -> str:
    """The Address_Set of ``node``'s bound pods; a valid OVN identifier for any node name."""
    return set_name("magw_egress_", node)


def egress_rows(snapshot: Snapshot, cluster_router: str) -> tuple[list[AddressSet], list[Policy]]:
    """The address sets and reroute policies of the egress gateway on OVN; none without a VIP.

    A bound pod on a node the snapshot does not know, or without a node, is left out: there is no management
    port to send it to (it leaves as an unbound pod would until its node appears)."""
    inputs = egressgw_inputs(snapshot, node="")
    if inputs is None:
        return [], []
    bound = {ip for _, users in inputs.resolution.users for ip in users.pods}
    mgmt = {n.name: n.cni_ip for n in snapshot.nodes}
    by_node: defaultdict[str, set[IPv4Address]] = defaultdict(set)
    for pod in inputs.pods:
        if pod.ip in bound and pod.node in mgmt:
            by_node[pod.node].add(pod.ip)
    if not by_node:
        return [], []
    sets = [AddressSet(name=EXCLUDED_SET, addresses=excluded(attrs.evolve(inputs, node_ips=())))]
    policies = []
    for node, ips in sorted(by_node.items()):
        name, hop = node_set_name(node), str(mgmt[node])
        sets.append(AddressSet(name=name, addresses=tuple(str(ip) for ip in ips)))
        policies += [
            Policy(
                router=cluster_router,
                priority=EGRESS_ALLOW_PRIORITY,
                match=f"ip4.src == ${name} && ip4.dst == ${EXCLUDED_SET}",
                nexthops=(),
                action="allow",
            ),
            Policy(router=cluster_router, priority=EGRESS_PRIORITY, match=f"ip4.src == ${name}", nexthops=(hop,)),
        ]
    return sets, policies
