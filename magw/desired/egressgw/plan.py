"""The egress gateway's datapath of one node (pure): ``plan_egressgw(EgressGatewayInputs) -> EgressGatewayPlan``.

Every node, whatever it holds (docs/egress-datapath.md):

- the VXLAN-GPE device ``magw-egress`` (collect-metadata, UDP 4801, MTU underlay - 36) with
  ``169.254.240.1/32`` (loose rp_filter needs an address);
- per VIP (vrid V): table 12000+V holding ``default dev magw-egress encap ip id V dst VIP``, and rule
  12000+V ``fwmark 0x1000|V/0x30ff lookup 12000+V``: a steered packet is tunnelled to whoever answers ARP
  for the VIP, so the GARP that moves the VIP moves the traffic and nothing here changes on a failover;
- the ``ip magw-egress`` table (magw.desired.egressgw.nftables): steering on every node; ingress DNAT, hairpin
  and SNAT on the VIP's candidates, all the time (only the holder receives what they match).

Never steered: the cluster's pod and service CIDRs, remote clusters' CIDRs, the nodes' IPs (kubelet probes,
host-network pods), link-local (169.254/16: NodeLocal DNS, cloud metadata), multicast/broadcast and class E
(224/3, Submariner's VTEPs), and any address local to the node. Unbound pods are in no set: untouched.

Same input, same output, byte for byte: every collection is sorted (VIPs by vrid, backends, ports).
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Interface, IPv4Network

import attrs

from magw.desired.egressgw import nftables as n
from magw.desired.egressgw.bindings import Resolution, service_backends
from magw.desired.egressgw.numbers import (
    DEVICE_ADDRESS,
    EGRESSGW_DEV,
    EGRESSGW_PORT,
    GPE_OVERHEAD,
    MARK_MASK,
    RULE_BASE,
    TABLE_BASE,
    steer_mark,
)
from magw.desired.egressgw.ports import services_by_name, vip_ports
from magw.desired.nft.plan import set_elements
from magw.desired.nft.values import NftChain, NftRule, NftSet, NftTable
from magw.desired.state import Address, DesiredState, Link, Route, RouteEncap, RouteNexthop, Rule
from magw.model.egressgw import EgressGateway, EgressVIP
from magw.model.globalnet import Pod, Service

TABLE_NAME = "magw-egress"
ALWAYS_EXCLUDED = (IPv4Network("169.254.0.0/16"), IPv4Network("224.0.0.0/3"))
TCPIP_HEADERS = 40
DEFAULT_ROUTE = IPv4Network("0.0.0.0/0")
NO_GATEWAY = IPv4Address(0)


@attrs.frozen(kw_only=True)
class EgressGatewayInputs:
    """What one node's egress datapath depends on. ``cluster_cidrs``: the local pod and service CIDRs;
    ``remote_cidrs``: every remote cluster's CIDRs (and global CIDRs); ``node_ips``: every node's underlay IP."""

    node: str
    underlay_mtu: int = 1500
    cluster_cidrs: tuple[IPv4Network, ...] = ()
    remote_cidrs: tuple[IPv4Network, ...] = ()
    node_ips: tuple[IPv4Address, ...] = ()
    egressgw: EgressGateway
    resolution: Resolution
    services: tuple[Service, ...] = ()
    pods: tuple[Pod, ...] = ()


@attrs.frozen(kw_only=True)
class EgressGatewayPlan:
    """The node's egress objects (merge them into its DesiredState) and one line per input problem."""

    state: DesiredState
    problems: tuple[str, ...] = ()


def excluded(inputs: EgressGatewayInputs) -> tuple[str, ...]:
    """The ``excluded`` set's elements: destinations never steered (see the module doc)."""
    nets: list[IPv4Network] = [*inputs.cluster_cidrs, *inputs.remote_cidrs, *ALWAYS_EXCLUDED]
    nets += [IPv4Network(ip) for ip in inputs.node_ips]
    return set_elements(nets)


def _vips(egress: EgressGateway) -> tuple[EgressVIP, ...]:
    return tuple(sorted(egress.vips, key=lambda v: v.vrid))


def _routing(vips: Iterable[EgressVIP]) -> tuple[tuple[Route, ...], tuple[Rule, ...]]:
    hop = (RouteNexthop(via=NO_GATEWAY, dev=EGRESSGW_DEV),)
    routes = tuple(
        Route(
            table=TABLE_BASE + v.vrid, dst=DEFAULT_ROUTE, metric=0, nexthops=hop, encap=RouteEncap(id=v.vrid, dst=v.vip)
        )
        for v in vips
    )
    rules = tuple(
        Rule(priority=RULE_BASE + v.vrid, table=TABLE_BASE + v.vrid, fwmark=steer_mark(v.vrid), fwmask=MARK_MASK)
        for v in vips
    )
    return routes, rules


def _dnat_rules(inputs: EgressGatewayInputs, held: Iterable[EgressVIP], problems: list[str]) -> list[NftRule]:
    """One DNAT rule per (VIP, protocol, port) of the Services using a VIP this node may hold."""
    services = services_by_name(inputs.services)
    backends: dict[str, tuple[IPv4Address, ...]] = {}
    rules = []
    for vip in held:
        used = vip_ports(vip.name, inputs.resolution.of(vip.name).services, services)
        problems.extend(used.problems)
        for port in used.ports:
            if port.service not in backends:
                backends[port.service] = service_backends(services[port.service], inputs.pods)
            if backends[port.service]:
                rules.append(n.dnat_rule(vip.vip, port.protocol, port.port, backends[port.service], port.target_port))
    return rules


def plan_nft(inputs: EgressGatewayInputs, problems: list[str]) -> NftTable:
    vips = _vips(inputs.egressgw)
    held = [v for v in vips if inputs.node in v.candidates]
    sets = [
        NftSet(name=n.EXCLUDED_SET, type="ipv4_addr", flags=("interval",), elements=excluded(inputs)),
        NftSet(
            name=n.BOUND_SET, type="ipv4_addr", elements=[str(p) for _, u in inputs.resolution.users for p in u.pods]
        ),
        *(
            NftSet(
                name=n.pods_set(v.vrid), type="ipv4_addr", elements=[str(p) for p in inputs.resolution.of(v.name).pods]
            )
            for v in vips
        ),
    ]
    chains = [
        NftChain(name="prerouting-raw", type="filter", hook="prerouting", priority=n.RAW_PRIORITY, policy="accept"),
        NftChain(name="forward", type="filter", hook="forward", priority=n.MANGLE_PRIORITY, policy="accept"),
    ]
    mss = inputs.underlay_mtu - GPE_OVERHEAD - TCPIP_HEADERS
    rules = [*n.raw_rules([(v.vrid, steer_mark(v.vrid)) for v in vips]), *n.forward_rules(mss if held else None)]
    if held:
        sets.append(NftSet(name=n.VIPS_SET, type="ipv4_addr", elements=[str(v.vip) for v in held]))
        chains += [
            NftChain(name="prerouting-nat", type="nat", hook="prerouting", priority=n.DNAT_PRIORITY, policy="accept"),
            NftChain(name="postrouting", type="nat", hook="postrouting", priority=n.SNAT_PRIORITY, policy="accept"),
        ]
        rules += [*n.dnat_classify_rules(), *_dnat_rules(inputs, held, problems)]
        rules += n.snat_rules([(v.vrid, v.vip) for v in held])
        if inputs.egressgw.config.conntrack_sync:
            guard = NftChain(
                name="prerouting-guard", type="filter", hook="prerouting", priority=n.MANGLE_PRIORITY, policy="accept"
            )
            chains.append(guard)
            rules += n.commit_guard_rules()
            sets.append(NftSet(name=n.SYNC_PEERS_SET, type="ipv4_addr", elements=[str(ip) for ip in inputs.node_ips]))
            chains.append(NftChain(name="input", type="filter", hook="input", priority=0, policy="accept"))
            rules += n.sync_guard_rules()
    return NftTable(family="ip", name=TABLE_NAME, sets=sets, chains=chains, rules=rules)


def plan_egressgw(inputs: EgressGatewayInputs) -> EgressGatewayPlan:
    """The node's egress datapath; an EgressGateway without VIPs plans nothing at all (no device, no table)."""
    vips = _vips(inputs.egressgw)
    if not vips:
        return EgressGatewayPlan(state=DesiredState())
    problems: list[str] = list(inputs.resolution.conflicts)
    routes, rules = _routing(vips)
    link = Link(
        name=EGRESSGW_DEV,
        vni=0,
        port=EGRESSGW_PORT,
        mtu=inputs.underlay_mtu - GPE_OVERHEAD,
        mac="",
        external=True,
        gpe=True,
    )
    state = DesiredState(
        links=(link,),
        addresses=(Address(dev=EGRESSGW_DEV, address=IPv4Interface(DEVICE_ADDRESS)),),
        routes=routes,
        rules=rules,
        nft=plan_nft(inputs, problems),
    )
    return EgressGatewayPlan(state=state, problems=tuple(problems))
