"""The egress gateway's part of a node's plan (pure): ``EgressGatewayInputs`` from the snapshot, then ``plan_egressgw``.

The route agent owns the node's datapath, so it plans the egress objects with the rest
(``magw.desired.node.planner``): the GPE device, its address, the per-VIP tables and rules join the node's
netlink objects, and the ``ip magw-egress`` table joins ``DesiredState.extra_nft``. Nothing here depends on
which node holds a VIP (docs/egress-datapath.md), so a failover changes no plan.

With ``cni: ovn`` the same objects: the OVN syncer's reroute policies (``magw.desired.ovn.egress``) bring each
node's bound pods into its host through the management port, where this datapath takes them.
"""

from __future__ import annotations

from magw.desired.egressgw.bindings import resolve
from magw.desired.egressgw.plan import EgressGatewayInputs, EgressGatewayPlan, plan_egressgw
from magw.model import Snapshot


def egressgw_inputs(snapshot: Snapshot, node: str) -> EgressGatewayInputs | None:
    """The inputs of ``node``'s egress datapath; None when the cluster has no VIP."""
    if not snapshot.egressgw.vips:
        return None
    local = snapshot.local_cluster
    own = [c for c in snapshot.clusters if c.id == local]
    remote = [net for c in snapshot.clusters if c.id != local for net in c.cidrs]
    workloads = snapshot.globalnet
    return EgressGatewayInputs(
        node=node,
        underlay_mtu=snapshot.config.underlay_mtu,
        cluster_cidrs=tuple(net for c in own for net in (*c.pod_cidrs, *c.service_cidrs)),
        remote_cidrs=tuple(remote),
        node_ips=tuple(n.ip for n in snapshot.nodes),
        egressgw=snapshot.egressgw,
        resolution=resolve(snapshot.egressgw, workloads.services, workloads.pods),
        services=workloads.services,
        pods=workloads.pods,
    )


def plan_node_egressgw(snapshot: Snapshot, node: str) -> EgressGatewayPlan | None:
    inputs = egressgw_inputs(snapshot, node)
    return None if inputs is None else plan_egressgw(inputs)
