"""Keep a remote client's address to a local Service's backends, with every gateway active (docs/client-ip.md).

Without it, a gateway SNATs a remote client's connection that kube-proxy DNATed to a pod on another node to its
own CNI IP (the seed's step 3-b), because the DNAT state lives on that gateway and the backend's node would
send the replies through any gateway (its routes to remote clusters spread over all of them). With
``Config.keep_client_ip`` the replies are steered instead:

1. The ingress gateway marks such a connection's packets (``prerouting`` after kube-proxy's DNAT:
   ``iifname vxlan-tunnel ct status dnat ip daddr @local_cidrs``, mark ``STEER``) and ip rule 99 sends them through
   table 11000, which routes each other node's pod CIDR (its Node ``spec.podCIDRs``) over ``vx-submariner`` to
   that node's VTEP. A backend whose node's pod CIDR is not known falls through to the main table and keeps
   the SNAT.
2. The backend's node sees the packet come out of ``vx-submariner`` with the ingress gateway's VTEP MAC as its
   Ethernet source (magw derives every VTEP MAC from the node's address). Every such request writes that
   gateway's index into its connection's conntrack mark (the last gateway a request came through wins: a flow
   moved by a failover, or by a gateway removed or back, keeps its entry here); each reply of it gets the index
   in its packet mark, and ip rule
   ``84 + index`` sends it through table ``11000 + index``, whose default route is that gateway's VTEP. Only
   gateways that remote clusters may send through get a table: active ones that, by the node's health view,
   reach some remote cluster.
3. The gateway undoes kube-proxy's DNAT on the reply as on any reply, so nothing but the backend's node's
   routing changes, and no SNAT happens: the backend sees the client's own address (its pod IP, or with
   Globalnet its global egress IP).

Marks: the bits ``0x0f000000`` of the packet mark and of the conntrack mark, always set with a mask. ``0x0f``
is *steer* (the ingress gateway's request), ``0x01..0x0e`` a local gateway's index: so at most 14 gateways per
cluster; a cluster with more keeps the SNAT. The index is a hash of the gateway's name with linear probing in
name order (it depends only on the set of gateway names). Kube-proxy (0x4000, 0x8000), the egress gateway
(0x30ff), Globalnet (0xc0000), Cilium (0x0f00) and Istio (0x0539) never set these bits; Calico's default mask
0xffff0000 covers them, as it covers Globalnet's (docs/client-ip.md: which CNIs this mode suits).

Both marks are cleared in ``forward`` once routing has used them: the kernel keeps an inner packet's mark on the
VXLAN packet it builds, whose own route lookup would otherwise follow the rule into ``vx-submariner`` again.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network

from magw.desired.nft import expr as x
from magw.desired.nft.values import NftChain, NftRule
from magw.desired.node.ids import hashed_slots
from magw.desired.node.roles import NodeRole
from magw.desired.state import Route, RouteNexthop, Rule
from magw.model import Cni, Snapshot
from magw.model.vtep import VX_SUBMARINER, VXLAN_TUNNEL, vtep_ip, vtep_mac

MARK_MASK = 0x0F000000
MARK_SHIFT = 24
STEER = 0x0F000000
MAX_GATEWAYS = 14
STEER_TABLE = 11000
STEER_RULE_PRIORITY = 99
RETURN_TABLE_BASE = 11000  # + index 1..14
RETURN_RULE_BASE = 84  # + index 1..14: 85..98, before the gateway table's rule (100)
CHAIN = "client-ip"
CHAIN_PRIORITY = -90  # after kube-proxy's DNAT (dstnat, -100) and conntrack (-200), before routing
ROUTE_METRIC = 100
_ALL = 0xFFFFFFFF

CLIENT_IP_TABLES: frozenset[int] = frozenset(range(STEER_TABLE, RETURN_TABLE_BASE + MAX_GATEWAYS + 1))
CLIENT_IP_RULE_PRIORITIES: frozenset[int] = frozenset(
    {STEER_RULE_PRIORITY, *range(RETURN_RULE_BASE + 1, RETURN_RULE_BASE + MAX_GATEWAYS + 1)}
)


def gateway_indexes(names: Iterable[str]) -> dict[str, int]:
    """A distinct index in 1..14 per gateway name: crc32, linear probing in name order; {} for more than 14."""
    unique = set(names)
    if len(unique) > MAX_GATEWAYS:
        return {}
    return {name: slot + 1 for name, slot in hashed_slots(unique, count=MAX_GATEWAYS).items()}


def local_gateways(snapshot: Snapshot) -> dict[str, int]:
    """Every local gateway's index, whatever its health (an index must not move when a gateway fails):
    nodes labelled gateway and the local cluster's published Endpoints."""
    names = {n.name for n in snapshot.nodes if n.gateway}
    names |= {e.hostname for e in snapshot.endpoints_of(snapshot.local_cluster)}
    return gateway_indexes(names)


def enabled(snapshot: Snapshot) -> bool:
    """On when the config asks for it, the CNI is the generic one (OVN balances services in its own routers,
    docs/ovn.md) and the cluster has 1..14 gateways."""
    return snapshot.config.keep_client_ip and snapshot.config.cni is Cni.GENERIC and bool(local_gateways(snapshot))


def mark_of(index: int) -> int:
    return index << MARK_SHIFT


def _other_gateways(snapshot: Snapshot, role: NodeRole) -> list[tuple[str, int, IPv4Address]]:
    """(name, index, VTEP on vx-submariner) of every other local gateway that remote clusters may send through:
    active (``role.local_gateways``) and, by this node's health view, reaching some remote cluster. A gateway that
    is down, lost its WAN or stands by carries no connection whose replies could be returned to it, so no table
    points at it (the failover tests check that nothing routes toward a dead gateway). Unless health allows none
    toward a remote cluster: then the routes keep every one (fail static, ``magw.desired.node.paths``), and so do
    the return tables, or a reply would follow the main table's hash instead of its request's gateway."""
    indexes = local_gateways(snapshot)
    active = [e for e in role.local_gateways if e.hostname in indexes]
    kept: set[str] = set()
    for c in snapshot.remote_clusters:
        allowed = {e.hostname for e in active if snapshot.health.usable(e.hostname, c.id)}
        kept |= allowed or {e.hostname for e in active}
    return [
        (e.hostname, indexes[e.hostname], vtep_ip(e.private_ip, inter_cluster=False))
        for e in active
        if e.hostname in kept
    ]


def plan_routing(snapshot: Snapshot, role: NodeRole) -> tuple[tuple[Route, ...], tuple[Rule, ...]]:
    """Tables 11000 (gateways: the steer table) and 11001-11014 (every node: one per other local gateway)."""
    routes: list[Route] = []
    rules: list[Rule] = []
    for _name, index, vtep in _other_gateways(snapshot, role):
        table = RETURN_TABLE_BASE + index
        hop = RouteNexthop(via=vtep, dev=VX_SUBMARINER)
        routes.append(Route(table=table, dst=IPv4Network("0.0.0.0/0"), metric=ROUTE_METRIC, nexthops=(hop,)))
        rules.append(Rule(priority=RETURN_RULE_BASE + index, table=table, fwmark=mark_of(index), fwmask=MARK_MASK))
    if role.gateway:
        pods = snapshot.cluster(snapshot.local_cluster).pod_cidrs
        for n in snapshot.nodes:
            if n.name == role.node.name:
                continue
            hop = RouteNexthop(via=vtep_ip(n.ip, inter_cluster=False), dev=VX_SUBMARINER)
            for cidr in n.pod_cidrs:
                if any(cidr.subnet_of(p) for p in pods):  # a node's claim outside the cluster's pods is ignored
                    routes.append(Route(table=STEER_TABLE, dst=cidr, metric=ROUTE_METRIC, nexthops=(hop,)))
        rules.append(Rule(priority=STEER_RULE_PRIORITY, table=STEER_TABLE, fwmark=STEER, fwmask=MARK_MASK))
    return tuple(routes), tuple(rules)


def _set(key: x.Expr, value: int) -> x.Expr:
    """``KEY set KEY & ~MARK_MASK | value``, in the shape nft prints back: value folded into the AND mask, and
    no AND at all when that leaves it all ones (``STEER`` is the whole field)."""
    keep = (_ALL & ~MARK_MASK) | value
    return x.mangle(key, x.bitor(key if keep == _ALL else x.bitand(key, keep), value))


def chain() -> NftChain:
    return NftChain(name=CHAIN, type="filter", hook="prerouting", priority=CHAIN_PRIORITY, policy="accept")


def nft_rules(snapshot: Snapshot, role: NodeRole, local_set: str) -> list[NftRule]:
    """The ``client-ip`` chain's rules on ``role``'s node (see the module's docstring)."""
    rules = []
    if role.gateway:
        rules.append(
            x.rule(
                CHAIN,
                x.iifname(VXLAN_TUNNEL),
                x.match(x.ct("direction"), "original"),
                x.flags_in(x.ct("status"), "dnat"),
                x.match(x.ip_daddr(), x.set_ref(local_set)),
                _set(x.meta("mark"), STEER),
                comment="magw: steer a remote client's DNATed service connection to the backend's node",
            )
        )
    for name, index, vtep in _other_gateways(snapshot, role):
        mac = vtep_mac(vtep)
        mark = mark_of(index)
        rules += [
            x.rule(
                CHAIN,
                x.iifname(VX_SUBMARINER),
                x.match(x.payload("ether", "saddr"), mac),
                # Every request, not only a new connection's: a flow whose requests move to another gateway (a
                # failover, a gateway removed or back) keeps its conntrack entry here, and its replies must follow
                # the gateway that now holds its DNAT state, not the one that first did.
                x.match(x.ct("direction"), "original"),
                x.match(x.ip_daddr(), x.set_ref(local_set)),
                _set(x.ct("mark"), mark),
                comment=f"magw: a service connection steered here by gateway {name}",
            ),
            x.rule(
                CHAIN,
                x.match(x.ct("direction"), "reply"),
                x.match(x.bitand(x.ct("mark"), MARK_MASK), mark),
                _set(x.meta("mark"), mark),
                comment=f"magw: its replies go back through gateway {name}",
            ),
        ]
    return rules


def forward_clear() -> NftRule:
    return x.rule(
        "forward",
        x.match(x.bitand(x.meta("mark"), MARK_MASK), 0, "!="),
        x.mangle(x.meta("mark"), x.bitand(x.meta("mark"), _ALL & ~MARK_MASK)),
        comment="magw: clear the client-ip mark once routed (the VXLAN packet built from it keeps it)",
    )


