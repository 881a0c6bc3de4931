"""A node of an OVN-Kubernetes cluster (``config.cni: ovn``): what its kernel holds besides OVN. Pure.

On OVN-Kubernetes, pods' packets travel inside OVN until the gateway: OVN's reroute policies send traffic
for remote clusters through a ``submariner_router`` pinned to a gateway's chassis, out of its localnet port
into ``br-submariner`` and the gateway host's ``ovn-k8s-sub0`` (169.254.254.10). The node side therefore is:

- **worker**: no pod routes at all (OVN carries them). Only the node's own host-network traffic to remote
  clusters needs steering into OVN: **table 150**, one route per remote CIDR (remote global CIDRs with
  Globalnet) ``via <OVN management next hop> dev ovn-k8s-mp0 src <cni_ip>``, looked up by rule 150
  ``from all lookup 150``. The source is the management port's address (the node's ``cni_ip``), an address
  of the pod network, so replies come back through OVN and, with Globalnet, the gateway translates it like
  a pod's. Submariner issue 1982 (Globalnet: "missing default route in table 150 on every worker") is the
  same path missing under Globalnet; here table 150 is planned in both modes, with the remote global CIDRs
  under Globalnet. We route exactly the remote CIDRs, never a default route: our rule is ``from all``, and a
  default route in table 150 would pull all host traffic (API server, DNS, the Internet) into OVN.
  The ``vx-submariner`` device and its neighbors stay, without routes: the health probes of a route agent
  hosting the OVN syncer go over it (magw.health.targets, docs/ovn.md "Failover").
- **gateway**: the generic gateway datapath unchanged (tunnels, table 100, Globalnet's nft), plus
  ``169.254.254.10/29`` on ``ovn-k8s-sub0`` and **table 149**: the local pod and service CIDRs
  ``via 169.254.254.9 dev ovn-k8s-sub0`` (``submariner_up_lrp``), looked up only by what arrives from remote
  clusters, rule 149 ``iif vxlan-tunnel lookup 149``. With Globalnet these are still the local CIDRs, not the
  global CIDR (Submariner issue 1983): the gateway's Globalnet translation (``prerouting-raw``, conntrack)
  happens before the routing decision, so the packet already carries a local address.
- **gateway nft** (our ``ip magw`` table, ``ovn_gateway_postrouting``): a null SNAT for traffic from remote
  clusters leaving into OVN through ``ovn-k8s-sub0``, so a CNI masquerade at srcnat never hides the remote
  client's address from local pods (the same trick as the generic plan's null SNAT, magw.desired.nft.plan).
  Everything else of the generic gateway's table already fits OVN: the null SNAT of local sources (Submariner's
  "no NAT" POSTROUTING rule), MSS clamping both ways, forward accepts on ``vxlan-tunnel``. With Globalnet the
  SNAT rules live in the ``postrouting`` base chain itself (magw.desired.globalnet.nft), so Submariner issue 1981 (the
  jump from SUBMARINER-POSTROUTING into the Globalnet egress chain sometimes missing) has no equivalent here:
  there is no jump to lose.

The management next hop is a node fact: OVN-Kubernetes gives ``ovn-k8s-mp0`` the second address of the node's
pod subnet (the ``cni_ip``) and the node's ``rtos-`` router port the first, so the default is ``cni_ip - 1``;
the route agent's ``--ovn-mgmt-nexthop`` overrides it (docs/ovn-node.md).
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface

import attrs

from magw.desired.globalnet.plan import routed_cidrs
from magw.desired.nft import expr as x
from magw.desired.nft.values import NftRule
from magw.desired.node.roles import NodeRole
from magw.desired.ovn.topology import HOST_IP, UP_IP
from magw.desired.state import Address, Route, RouteNexthop, Rule
from magw.model import Snapshot, net_key
from magw.model.vtep import VXLAN_TUNNEL

MGMT_DEV = "ovn-k8s-mp0"  # OVN-Kubernetes' management port: the host's door into the pod network
SUB_DEV = "ovn-k8s-sub0"  # the internal port of br-submariner (magw.drivers.ovs)
SUB_PREFIXLEN = 29  # 169.254.254.8/29: submariner_up_lrp .9, ovn-k8s-sub0 .10
INGRESS_TABLE = 149
INGRESS_RULE_PRIORITY = 149
HOST_TABLE = 150
HOST_RULE_PRIORITY = 150
ROUTE_METRIC = 100


@attrs.frozen(kw_only=True)
class OvnNodeObjects:
    """What ``cni: ovn`` adds to a node's plan."""

    addresses: tuple[Address, ...] = ()
    routes: tuple[Route, ...] = ()
    rules: tuple[Rule, ...] = ()


def sub_address() -> IPv4Interface:
    """``ovn-k8s-sub0``'s address, ``169.254.254.10/29``."""
    return IPv4Interface(f"{HOST_IP}/{SUB_PREFIXLEN}")


def default_mgmt_nexthop(cni_ip: IPv4Address) -> IPv4Address:
    """OVN-Kubernetes' node router port: the address just below the management port's (``cni_ip``).

    A result ending in ``.0`` (a ``cni_ip`` ending in ``.0`` or ``.1``) is no OVN-Kubernetes layout: the node
    subnet's first address is its network address, so refuse rather than route to it.
    """
    if int(cni_ip) & 0xFF in (0, 1):
        raise ValueError(
            f"node cni_ip {cni_ip}: OVN-Kubernetes gives ovn-k8s-mp0 the subnet's second address and its router "
            "the first, so the management next hop cannot be derived from it; give --ovn-mgmt-nexthop"
        )
    return cni_ip - 1


def plan_ovn_worker(snapshot: Snapshot, role: NodeRole, mgmt_nexthop: IPv4Address | None) -> OvnNodeObjects:
    """Table 150 and rule 150 (see the module doc)."""
    node = role.node
    via = mgmt_nexthop if mgmt_nexthop is not None else default_mgmt_nexthop(node.cni_ip)
    globalnet = any(c.global_cidrs for c in snapshot.clusters)  # the planner already refused a mixed clusterset
    hop = (RouteNexthop(via=via, dev=MGMT_DEV),)
    routes = tuple(
        Route(table=HOST_TABLE, dst=dst, metric=ROUTE_METRIC, src=node.cni_ip, nexthops=hop)
        for cluster in snapshot.remote_clusters
        for dst in routed_cidrs(cluster, globalnet)
    )
    return OvnNodeObjects(routes=routes, rules=(Rule(priority=HOST_RULE_PRIORITY, table=HOST_TABLE),))


def plan_ovn_gateway(snapshot: Snapshot) -> OvnNodeObjects:
    """``ovn-k8s-sub0``'s address, table 149 and rule 149 (see the module doc)."""
    local = snapshot.cluster(snapshot.local_cluster)
    hop = (RouteNexthop(via=IPv4Address(UP_IP), dev=SUB_DEV),)
    dsts = {net_key(n): n for n in (*local.pod_cidrs, *local.service_cidrs)}  # a CIDR given twice routes once
    routes = tuple(Route(table=INGRESS_TABLE, dst=dsts[k], metric=ROUTE_METRIC, nexthops=hop) for k in sorted(dsts))
    return OvnNodeObjects(
        addresses=(Address(dev=SUB_DEV, address=sub_address()),),
        routes=routes,
        rules=(Rule(priority=INGRESS_RULE_PRIORITY, table=INGRESS_TABLE, iif=VXLAN_TUNNEL),),
    )


def ovn_gateway_postrouting(remote_set: str) -> list[NftRule]:
    """The gateway's OVN addition to ``postrouting`` (see the module doc); after the generic rules."""
    return [
        x.rule(
            "postrouting",
            x.match(x.ip_saddr(), x.set_ref(remote_set)),
            x.oifname(SUB_DEV),
            x.snat(x.ip_saddr()),
            comment="magw ovn: keep remote source IPs into OVN (null SNAT stops a later CNI masquerade)",
        )
    ]
