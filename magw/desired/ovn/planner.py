"""The pure OVN planner: ``plan_ovn(snapshot, inputs) -> OvnPlan``. No I/O, no clock.

It gives every NB row magw owns for the local cluster (``magw.desired.ovn.rows``), in the seed's topology
extended to one gateway router per active gateway (``magw.desired.ovn.topology``, docs/ovn.md):

- per slot: ``submariner_router[_k]`` pinned with ``options:chassis`` to its gateway's chassis and using
  the cluster's load-balancer group (with several active gateways, ``options:lb_force_snat_ip=router_ip``, so a
  service's replies return through the router that balanced it); its port on ``submariner_join`` and its uplink
  switch with a localnet port toward ``br-submariner``; static routes for every remote CIDR toward the host
  (169.254.254.10) and for every local CIDR toward ``ovn_cluster_router`` (169.254.254.2);
- ``submariner_join`` with ``ovn_cluster_subm_lrp`` on ``ovn_cluster_router``;
- per remote cluster: an Address_Set of its CIDRs and one priority-20000 reroute policy on
  ``ovn_cluster_router`` whose nexthops are the join addresses of the usable gateways that reach that
  cluster: several nexthops are an ECMP set. A gateway failing changes only these policies' ``nexthops``;
- with egress VIPs, per node with bound pods an Address_Set of them, an allow policy (19001) to the cluster's and
  remote CIDRs and a reroute policy (19000) into the node's own management port (``magw.desired.ovn.egress``).

With Globalnet, remote means the remote clusters' global CIDRs (what local pods address) and local means the
local pod and service CIDRs (what remains after the gateway host's DNAT): the "corrected logical routes" of
the seed.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from magw.desired.globalnet.plan import globalnet_mode
from magw.desired.node.roles import active_endpoints
from magw.desired.ovn.egress import egress_rows
from magw.desired.ovn.rows import AddressSet, OvnState, Policy, Router, RouterPort, StaticRoute, Switch, SwitchPort
from magw.desired.ovn.slots import assign_slots
from magw.desired.ovn.topology import (
    CLUSTER_PORT,
    CLUSTER_PORT_IP,
    CLUSTER_PORT_MAC,
    CLUSTER_ROUTER,
    CLUSTER_SWITCH_PORT,
    HOST_IP,
    JOIN_CIDR_LEN,
    JOIN_SWITCH,
    LB_GROUP,
    LOCALNET_NETWORK,
    POLICY_PRIORITY,
    UP_IP,
    Slot,
    remote_set_name,
)
from magw.model import Cluster, Snapshot


class OvnPlanError(ValueError):
    """The plan cannot be made from this input (one line: what is wrong and what it concerns)."""


@attrs.frozen(kw_only=True)
class OvnInputs:
    """What the planner needs besides the snapshot.

    ``chassis``: SB ``Chassis.hostname`` -> ``Chassis.name``. ``previous_slots``: the slots our routers
    already hold (``magw.desired.ovn.slots``). The names of OVN-Kubernetes' router and load-balancer group.
    """

    chassis: Mapping[str, str]
    previous_slots: Mapping[str, int] = attrs.field(factory=dict)
    cluster_router: str = CLUSTER_ROUTER
    lb_group: str | None = LB_GROUP


@attrs.frozen(kw_only=True)
class OvnPlan:
    """Our rows, and the foreign things they rely on, which the driver checks before it writes anything."""

    state: OvnState
    slots: Mapping[str, int]
    needs_routers: tuple[str, ...]
    needs_lb_groups: tuple[str, ...]
    needs_chassis: tuple[str, ...]


def _remote_cidrs(cluster: Cluster, globalnet: bool) -> tuple[str, ...]:
    nets = cluster.global_cidrs if globalnet else cluster.cidrs
    return tuple(str(n) for n in nets)


def plan_ovn(snapshot: Snapshot, inputs: OvnInputs) -> OvnPlan:
    """The complete desired NB state of the local cluster; OvnPlanError for input it cannot plan."""
    try:
        local = snapshot.cluster(snapshot.local_cluster)
        globalnet = globalnet_mode(snapshot)
    except (KeyError, ValueError) as exc:
        raise OvnPlanError(f"ovn: {exc}") from None
    # A gateway that is down and whose chassis is gone (its node was removed) gets no router: the failover
    # must not wait for its Endpoint to go. A usable gateway without a chassis is an error.
    gateways = [
        e.hostname
        for e in active_endpoints(snapshot, local.id)
        if e.hostname in inputs.chassis or snapshot.health.usable(e.hostname)
    ]
    missing = [gw for gw in gateways if gw not in inputs.chassis]
    if missing:
        known = ", ".join(sorted(inputs.chassis)) or "none"
        raise OvnPlanError(
            f"ovn: no SB chassis has hostname {', '.join(sorted(missing))} (gateway of cluster {local.id!r}; "
            f"chassis hostnames known: {known})"
        )
    try:
        slots = assign_slots(gateways, inputs.previous_slots)
    except ValueError as exc:
        raise OvnPlanError(str(exc)) from None

    remote = [(c, _remote_cidrs(c, globalnet)) for c in snapshot.remote_clusters]
    local_cidrs = tuple(str(n) for n in (*local.pod_cidrs, *local.service_cidrs))
    routers, router_ports, switches, switch_ports, routes = [], [], [], [], []
    switches.append(Switch(name=JOIN_SWITCH))
    router_ports.append(
        RouterPort(
            name=CLUSTER_PORT,
            router=inputs.cluster_router,
            mac=CLUSTER_PORT_MAC,
            networks=(f"{CLUSTER_PORT_IP}/{JOIN_CIDR_LEN}",),
        )
    )
    switch_ports.append(_router_peer(CLUSTER_SWITCH_PORT, JOIN_SWITCH, CLUSTER_PORT))
    # Several active gateways: a remote client's connection to a service is DNATed by the router it entered
    # through, but the backend's reply is hashed over every router by the reroute policy; SNAT to the router's
    # join address brings the reply back to the router holding the DNAT (docs/ovn.md, "Services").
    lb_snat = snapshot.config.multi_active and inputs.lb_group is not None
    for gw, number in sorted(slots.items()):
        s = Slot(number)
        routers.append(
            Router(
                name=s.router,
                chassis=inputs.chassis[gw],
                lb_group=inputs.lb_group,
                lb_snat=lb_snat,
                gateway=gw,
                slot=number,
            )
        )
        router_ports.append(
            RouterPort(name=s.join_port, router=s.router, mac=s.join_mac, networks=(f"{s.join_ip}/{JOIN_CIDR_LEN}",))
        )
        router_ports.append(RouterPort(name=s.up_port, router=s.router, mac=s.up_mac, networks=(f"{UP_IP}/29",)))
        switches.append(Switch(name=s.up_switch))
        switch_ports.append(_router_peer(s.join_switch_port, JOIN_SWITCH, s.join_port))
        switch_ports.append(_router_peer(s.up_switch_port, s.up_switch, s.up_port))
        switch_ports.append(
            SwitchPort(
                name=s.localnet_port,
                switch=s.up_switch,
                type="localnet",
                addresses=("unknown",),
                options={"network_name": LOCALNET_NETWORK},
            )
        )
        for _, cidrs in remote:
            routes += [StaticRoute(router=s.router, prefix=p, nexthop=HOST_IP, output_port=s.up_port) for p in cidrs]
        routes += [
            StaticRoute(router=s.router, prefix=p, nexthop=CLUSTER_PORT_IP, output_port=s.join_port)
            for p in local_cidrs
        ]

    address_sets, policies = [], []
    for cluster, cidrs in remote:
        name = remote_set_name(cluster.id)
        address_sets.append(AddressSet(name=name, addresses=cidrs))
        hops = _nexthops(snapshot, slots, cluster.id)
        if hops:
            policies.append(
                Policy(
                    router=inputs.cluster_router, priority=POLICY_PRIORITY, match=f"ip4.dst == ${name}", nexthops=hops
                )
            )
    egress_sets, egress_policies = egress_rows(snapshot, inputs.cluster_router)
    address_sets += egress_sets
    policies += egress_policies
    state = OvnState(
        address_sets=address_sets,
        routers=routers,
        switches=switches,
        router_ports=router_ports,
        switch_ports=switch_ports,
        routes=routes,
        policies=policies,
    )
    return OvnPlan(
        state=state,
        slots=slots,
        needs_routers=(inputs.cluster_router,),
        needs_lb_groups=(inputs.lb_group,) if inputs.lb_group and slots else (),
        needs_chassis=tuple(sorted({inputs.chassis[gw] for gw in slots})),
    )


def _router_peer(name: str, switch: str, router_port: str) -> SwitchPort:
    return SwitchPort(
        name=name, switch=switch, type="router", addresses=("router",), options={"router-port": router_port}
    )


def _nexthops(snapshot: Snapshot, slots: Mapping[str, int], cluster_id: str) -> tuple[str, ...]:
    """The join addresses of the gateways that may carry traffic to ``cluster_id``.

    Usable ones (up, and reaching the cluster) when there are any; otherwise every gateway: with none usable
    there is no better choice, and a policy left out would send the traffic to the default route instead.
    """
    usable = [Slot(n).join_ip for gw, n in slots.items() if snapshot.health.usable(gw, cluster_id)]
    return tuple(usable or (Slot(n).join_ip for n in slots.values()))
