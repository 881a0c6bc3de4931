"""Our nftables table ``ip magw``: keep pod source IPs, return-path SNAT, forwarding and MSS clamping.

Chains and why:

- ``postrouting`` (nat, priority 90 = srcnat - 10):
  * gateway: ``ip saddr @remote_cidrs ct status dnat oifname != "vxlan-tunnel"
    snat to <cni_ip>``: a remote client's connection to a service, DNATed here
    to a pod elsewhere in the cluster, is SNATed to this gateway so the replies
    come back through it (the conntrack state lives here);
  * every node: ``ip saddr @local_cidrs ip daddr @remote_cidrs snat to ip
    saddr``: a *null SNAT*. Netfilter runs the nat base chains of one hook in
    priority order and stops at the first one that sets a NAT binding for the
    connection. This rule binds the connection to its own source address at
    priority 90, so a CNI's masquerade at srcnat (100) never runs for
    inter-cluster traffic and pod source IPs survive. An ``accept`` here would
    not help: it ends only our chain, and the CNI's table still sees the packet.
- ``forward`` (filter, priority 0): MSS clamping to the route MTU both ways
  first (the VXLAN MTU is 50 bytes below the underlay), then, on gateways, drop
  a Service's reply from ``vx-submariner`` that would open a connection (its
  DNAT state is on another node: ``_orphan_replies``), and accept what comes
  from or goes into ``vxlan-tunnel``: a reply may return through another
  gateway than its request left by, where no conntrack state exists, and a
  stateful CNI firewall would drop it.
- ``client-ip`` (filter, prerouting priority -90) with ``Config.keep_client_ip``: steer remote clients' service
  connections to the backend's node and their replies back to the ingress gateway, so the SNAT above applies
  only where the backend's node is not known (magw.desired.node.clientip).
- ``input`` (filter, priority 0): VXLAN decapsulates whatever reaches its port, so a sender who can reach a node's
  VXLAN port could put any packet, from any source address, into the cluster. Every node drops cluster VXLAN
  (4800) from anyone but the local cluster's nodes (set ``cluster_nodes``); a gateway with the VXLAN cable drops
  inter-cluster VXLAN (4500) from inside the tunnel and from anyone but the remote gateways' private and public
  addresses, and with Globalnet their published egress IPs (set ``vxlan_peers``). With ``cable: wireguard`` a
  gateway drops WireGuard packets from anyone but the remote gateways (set ``wg_peers``), and inter-cluster
  VXLAN that did not come out of ``magw-wg``: plain VXLAN from the WAN would bypass the encryption. Then the
  VXLAN ports are accepted (4500, 4800).
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network

from magw.desired.globalnet import nft as gnnft
from magw.desired.globalnet.incremental import IncrementalTranslations
from magw.desired.globalnet.plan import GatewayTranslations, globalnet_mode, routed_cidrs
from magw.desired.nft import expr as x
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.desired.node import clientip
from magw.desired.node.memo import PlanMemo
from magw.desired.node.roles import NodeRole
from magw.desired.ovn import node as ovnnode
from magw.model import Cni, Config, Endpoint, Snapshot, dotted, net_key
from magw.model.cable import WG_DEVICE, Cable
from magw.model.vtep import INTER_PORT, INTRA_PORT, VX_SUBMARINER, VXLAN_TUNNEL

TABLE_FAMILY = "ip"
TABLE_NAME = "magw"
LOCAL_SET = "local_cidrs"
REMOTE_SET = "remote_cidrs"
WG_PEERS_SET = "wg_peers"
VXLAN_PEERS_SET = "vxlan_peers"
NODES_SET = "cluster_nodes"
SRCNAT_PRIORITY = 100
POSTROUTING_PRIORITY = SRCNAT_PRIORITY - 10
FILTER_PRIORITY = 0
TRANSLATIONS_SLOT = "globalnet_translations"


def set_elements(nets: Iterable[IPv4Network]) -> tuple[str, ...]:
    """Interval-set elements: drop prefixes inside another (nft rejects overlaps), /32 as a plain address.

    Adjacent prefixes stay separate: a named interval set keeps them as given.
    One sweep: sorted by start address, a wider prefix comes before the narrower
    ones it holds, and two prefixes overlap only when one holds the other.
    The sweep runs on ``(start, prefixlen)`` integers and formats the text from them
    (docs/performance.md: ``IPv4Network`` comparisons and ``str()`` were a profile hot spot at 100k CIDRs).
    """
    kept: list[tuple[int, int]] = []
    kept_last = -1
    for start, plen in sorted({net_key(net) for net in nets}):
        if start > kept_last:  # sorted by start: a prefix starting inside the last kept one lies inside it
            kept.append((start, plen))
            kept_last = start + (1 << (32 - plen)) - 1
    return tuple(dotted(start) if plen == 32 else f"{dotted(start)}/{plen}" for start, plen in kept)


def _cidr_set(name: str, nets: Iterable[IPv4Network]) -> NftSet:
    return NftSet(name=name, type="ipv4_addr", flags=("interval",), elements=set_elements(nets))


def _postrouting(role: NodeRole, *, globalnet: bool, client_ip: bool) -> list[NftRule]:
    rules = []
    if role.gateway:
        rules.append(_svc_return(role.node.cni_ip) if not client_ip else _svc_return_fallback(role))
    if globalnet and role.gateway:
        return rules  # the Globalnet SNAT rules follow (gnnft): a null SNAT would keep local sources
    rules.append(
        x.rule(
            "postrouting",
            x.match(x.ip_saddr(), x.set_ref(LOCAL_SET)),
            x.match(x.ip_daddr(), x.set_ref(REMOTE_SET)),
            x.snat(x.ip_saddr()),
            comment="magw: keep pod source IPs to remote clusters (null SNAT stops a later CNI masquerade)",
        )
    )
    return rules


def _svc_return(cni_ip: IPv4Address) -> NftRule:
    return x.rule(
        "postrouting",
        x.match(x.ip_saddr(), x.set_ref(REMOTE_SET)),
        x.flags_in(x.ct("status"), "dnat"),
        x.oifname(VXLAN_TUNNEL, negate=True),
        x.snat(cni_ip),
        comment="magw: SNAT remote clients of DNATed services so replies return through this gateway",
    )


def _svc_return_fallback(role: NodeRole) -> NftRule:
    """With ``keep_client_ip``: SNAT only what was not steered (magw.desired.node.clientip), that is what leaves
    neither by ``vx-submariner`` nor into the tunnel, unless it is for this node's own pods (their replies leave
    through this gateway anyway)."""
    return x.rule(
        "postrouting",
        x.match(x.ip_saddr(), x.set_ref(REMOTE_SET)),
        x.flags_in(x.ct("status"), "dnat"),
        x.oifname(VXLAN_TUNNEL, negate=True),
        x.oifname(VX_SUBMARINER, negate=True),
        *(x.match(x.ip_daddr(), x.prefix(net), "!=") for net in role.node.pod_cidrs),
        x.snat(role.node.cni_ip),
        comment="magw: SNAT remote clients of DNATed services whose backend's node is not known",
    )


def _orphan_replies(service_cidrs: Iterable[IPv4Network]) -> list[NftRule]:
    """A gateway drops a Service's reply that would open a connection: one whose DNAT state lives on another node.

    kube-proxy's DNAT, undone on the node that made it, gives a reply the Service's ClusterIP as its source; a
    ClusterIP never opens a connection. Such a reply reaches this gateway over ``vx-submariner`` when the node
    holding the DNAT state has stopped being a gateway (its remote clients' flows move here; replies to requests
    still in flight there, and of connections whose backend it hosts, now route through us). Accepted, it would
    open a conntrack entry here in the reply's direction, and the flow's next requests would match it as replies
    and skip the DNAT: the flow stays dark for as long as it sends (the soak's ``gateway-remove`` fault found it,
    docs/robustness.md). Dropped, the next request opens the right entry."""
    return [
        x.rule(
            "forward",
            x.iifname(VX_SUBMARINER),
            x.match(x.ip_saddr(), x.prefix(net)),
            x.flags_in(x.ct("state"), "new"),
            x.drop(),
            comment="magw: a Service's reply whose DNAT state is on another node must not open a connection here",
        )
        for net in service_cidrs
    ]


def _forward(role: NodeRole, *, client_ip: bool, service_cidrs: Iterable[IPv4Network]) -> list[NftRule]:
    # first: the gateways' accept rules below end the chain before a later rule could clear the mark
    rules = [clientip.forward_clear()] if client_ip else []
    if role.gateway:
        rules += _orphan_replies(service_cidrs)
    rules += [
        x.rule(
            "forward",
            x.tcp_flags("syn", ("syn", "rst")),
            x.match(x.ip_daddr(), x.set_ref(REMOTE_SET)),
            x.mss_clamp_to_pmtu(),
            comment="magw: clamp TCP MSS to the path MTU toward remote clusters",
        ),
        x.rule(
            "forward",
            x.tcp_flags("syn", ("syn", "rst")),
            x.match(x.ip_saddr(), x.set_ref(REMOTE_SET)),
            x.mss_clamp_to_pmtu(),
            comment="magw: clamp TCP MSS to the path MTU from remote clusters",
        ),
    ]
    if role.gateway:
        rules += [
            x.rule(
                "forward",
                x.iifname(VXLAN_TUNNEL),
                x.match(x.ip_daddr(), x.set_ref(LOCAL_SET)),
                x.accept(),
                comment="magw: accept remote traffic to local CIDRs, even replies without local conntrack state",
            ),
            x.rule(
                "forward",
                x.oifname(VXLAN_TUNNEL),
                x.accept(),
                comment="magw: accept traffic leaving for remote clusters",
            ),
        ]
    return rules


def _wireguard_input(config: Config) -> list[NftRule]:
    return [
        x.rule(
            "input",
            x.udp_dport(config.wireguard_port),
            x.match(x.ip_saddr(), x.set_ref(WG_PEERS_SET), "!="),
            x.drop(),
            comment="magw: WireGuard only from remote gateways",
        ),
        x.rule(
            "input",
            x.udp_dport(INTER_PORT),
            x.iifname(WG_DEVICE, negate=True),
            x.drop(),
            comment="magw: inter-cluster VXLAN only out of magw-wg (never in the clear)",
        ),
    ]


def _wg_peers(snapshot: Snapshot) -> NftSet:
    """Where each remote WireGuard gateway's packets come from: its published address, and its private one when
    this node's NAT discovery found that path (either side may use it first)."""
    peers = {
        ip
        for c in snapshot.remote_clusters
        for e in snapshot.endpoints_of(c.id)
        if e.cable_ready(Cable.WIREGUARD)
        for ip in (e.underlay_ip, e.published_underlay_ip, *_nat_source(e))
    }
    return NftSet(name=WG_PEERS_SET, type="ipv4_addr", flags=(), elements=tuple(str(ip) for ip in sorted(peers)))


def _nat_source(e: Endpoint) -> tuple[IPv4Address, ...]:
    """The address a NAT beside the gateway's load balancer gives its cable packets, if it publishes one."""
    return () if e.nat_source_ip is None else (e.nat_source_ip,)


def _address_set(name: str, addresses: Iterable[IPv4Address]) -> NftSet:
    return NftSet(name=name, type="ipv4_addr", flags=(), elements=tuple(str(ip) for ip in sorted(set(addresses))))


def _vxlan_peers(snapshot: Snapshot) -> NftSet:
    """Both addresses of every remote gateway: its VXLAN may reach us from either (1:1 NAT or not). With Globalnet
    also its published cluster egress IPs: builds before the ``output-mark`` fix (magw.desired.globalnet.nft) SNAT
    their outer packets to them, and a rolling upgrade has clusters on both builds (tests/lab/test_lab_upgrade.py);
    ``_vxlan_guards`` refuses those addresses from inside the tunnel, where a remote pod's packet carries them."""
    return _address_set(
        VXLAN_PEERS_SET,
        (
            ip
            for c in snapshot.remote_clusters
            for e in snapshot.endpoints_of(c.id)
            for ip in (e.private_ip, e.published_underlay_ip, *e.allocated_ips, *_nat_source(e))
        ),
    )


def _vxlan_guards(*, inter: bool) -> list[NftRule]:
    rules = [
        x.rule(
            "input",
            x.udp_dport(INTRA_PORT),
            x.match(x.ip_saddr(), x.set_ref(NODES_SET), "!="),
            x.drop(),
            comment="magw: cluster VXLAN only from the cluster's nodes",
        )
    ]
    if inter:
        rules += [
            x.rule(
                "input",
                x.udp_dport(INTER_PORT),
                x.iifname(VXLAN_TUNNEL),
                x.drop(),
                comment="magw: no inter-cluster VXLAN from inside the tunnel",
            ),
            x.rule(
                "input",
                x.udp_dport(INTER_PORT),
                x.match(x.ip_saddr(), x.set_ref(VXLAN_PEERS_SET), "!="),
                x.drop(),
                comment="magw: inter-cluster VXLAN only from remote gateways",
            ),
        ]
    return rules


def _input() -> list[NftRule]:
    return [
        x.rule(
            "input",
            x.udp_dport((INTER_PORT, INTRA_PORT)),
            x.accept(),
            comment="magw: accept VXLAN from peers",
        )
    ]


def _base_chain(hook: str, kind: str, priority: int) -> NftChain:
    """A base chain named after its hook, policy accept (we only add to what others decide)."""
    return NftChain(name=hook, type=kind, hook=hook, priority=priority, policy="accept")


def plan_nft(snapshot: Snapshot, role: NodeRole, memo: PlanMemo) -> NftTable | None:
    """The ``ip magw`` table, or None when there is no remote cluster.

    With Globalnet, ``remote_cidrs`` holds the remote global CIDRs only (remote pod and service CIDRs may
    be our own), and a gateway adds the Globalnet chains, sets and maps of ``magw.desired.globalnet.nft``.
    Through ``memo``, each CIDR set is the last plan's while its clusters are the same objects (at 100k
    remote CIDRs the set cost 0.22 s to build, and comparing a new one with the kernel's as much again).
    """
    remote = snapshot.remote_clusters
    if not remote:
        return None
    globalnet = globalnet_mode(snapshot)
    local = snapshot.cluster(snapshot.local_cluster)
    sets = [
        memo.get("local_set", (local,), lambda: _cidr_set(LOCAL_SET, local.cidrs)),
        memo.get(
            "remote_set",
            remote,
            lambda: _cidr_set(REMOTE_SET, (n for c in remote for n in routed_cidrs(c, globalnet))),
            values=globalnet,
        ),
    ]
    maps: list[NftMap] = []
    chains = [
        NftChain(name="postrouting", type="nat", hook="postrouting", priority=POSTROUTING_PRIORITY, policy="accept"),
        NftChain(name="forward", type="filter", hook="forward", priority=FILTER_PRIORITY, policy="accept"),
        NftChain(name="input", type="filter", hook="input", priority=FILTER_PRIORITY, policy="accept"),
    ]
    client_ip = clientip.enabled(snapshot)
    rules = [
        *_postrouting(role, globalnet=globalnet, client_ip=client_ip),
        *_forward(role, client_ip=client_ip, service_cidrs=local.service_cidrs),
    ]
    if client_ip:
        chains.append(clientip.chain())
        rules += clientip.nft_rules(snapshot, role, LOCAL_SET)
    sets.append(_address_set(NODES_SET, (n.ip for n in snapshot.nodes)))
    vxlan_gateway = snapshot.config.cable is Cable.VXLAN and role.gateway
    if vxlan_gateway:
        sets.append(_vxlan_peers(snapshot))
    rules += _vxlan_guards(inter=vxlan_gateway)
    if snapshot.config.cable is Cable.WIREGUARD and role.gateway:
        sets.append(_wg_peers(snapshot))
        rules += _wireguard_input(snapshot.config)
    rules += _input()
    if snapshot.config.cni is Cni.OVN and role.gateway:
        rules += ovnnode.ovn_gateway_postrouting(REMOTE_SET)
    if globalnet and role.gateway:
        tr = _translations(snapshot, role.node.name, memo)
        sets += gnnft.gateway_sets(tr)
        maps += gnnft.gateway_maps(tr)
        chains += gnnft.gateway_chains()
        rules += [*gnnft.gateway_nat_rules(tr), *gnnft.gateway_rules(REMOTE_SET)]
    return NftTable(family=TABLE_FAMILY, name=TABLE_NAME, sets=sets, maps=maps, chains=chains, rules=rules)


def _translations(snapshot: Snapshot, node: str, memo: PlanMemo) -> GatewayTranslations:
    """The gateway's Globalnet translations, updated from the memo's last ones by what changed (100k pods: one pod
    event is a few ms instead of a second, docs/performance.md row 22b)."""
    carried = memo.carried(TRANSLATIONS_SLOT)
    incremental = carried.get(node)
    if not isinstance(incremental, IncrementalTranslations):
        incremental = IncrementalTranslations(node)
    memo.carry(TRANSLATIONS_SLOT, {node: incremental})
    return incremental.update(snapshot.globalnet)
