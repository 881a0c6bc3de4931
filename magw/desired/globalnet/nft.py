"""A Globalnet gateway's part of our ``ip magw`` table: a constant set of rules over sets and maps.

Membership lives in sets and maps, so the rules never grow with pods, namespaces or services, and a pod
change is an element change (docs/globalnet.md shows the table as text). Traffic to a remote cluster's
global CIDRs (``@remote_cidrs``) is marked ``0xc0000/0xc0000``; only marked traffic is SNATed.

- ``prerouting-mark`` / ``output-mark`` (filter, mangle priority -150): set the mark on traffic to remote
  global CIDRs, forwarded (from pods) or from the node itself (host network). First, ``output-mark`` clears
  our bits on the tunnel's own outer packets (UDP to the VXLAN port, not to a remote global CIDR): the kernel
  keeps an inner packet's mark on the VXLAN packet it builds in the same namespace, so without this the
  outer packet was SNATed too and left for the remote gateway's public address from one of our global IPs,
  which the remote gateway's input guard (``vxlan_peers``) rightly drops, as would a cloud's anti-spoofing.
  Both VXLAN ports: ``keep_client_ip`` sends marked service replies over ``vx-submariner`` (4800) to another
  gateway (magw.desired.node.clientip), and that gateway's guard (``cluster_nodes``) drops a SNATed outer packet.
- ``prerouting-raw`` (filter, raw priority -300, before conntrack): a packet from a remote cluster to one of
  our one-to-one global IPs gets its destination rewritten to the local address (``@gn_in``): the ClusterIP
  of an exported service (kube-proxy, whatever its mode, then balances it as any ClusterIP connection: we do
  not depend on its externalIPs handling) or a headless pod / endpoint address. Stateless, so every gateway
  translates the same and conntrack only ever sees local addresses.
- ``postrouting`` (nat, priority 90, before a CNI's masquerade at 100), marked traffic only, first match
  wins, which is the precedence of docs/globalnet.md:
  1. a one-to-one local address (``@gn_static``): a *null* SNAT (to its own address) binds the connection so
     no masquerade touches it; ``postrouting-out`` rewrites it to its global IP;
  2. a pod with a GlobalEgressIP (pod selector, then namespace): ``snat to ip saddr map @gn_egress``, this
     gateway's own address of that object;
  3. everything else, host network included: this gateway's cluster egress IPs (a range). Without any
     (the controller has not written them yet) marked traffic is dropped: a local address, which another
     cluster may also use, must never leave.
- ``postrouting-out`` (filter, priority 300, after every NAT): the stateless source rewrite of one-to-one
  addresses (``@gn_out``) toward remote global CIDRs: a headless pod's own egress, and the replies of an
  exported service (after kube-proxy's reverse DNAT gave them the ClusterIP as source). Not what leaves by
  ``vx-submariner``: that stays in the cluster, as a service reply that ``keep_client_ip`` returns from a backend
  on this gateway to the gateway holding its DNAT (magw.desired.node.clientip), which must arrive unchanged.
"""

from __future__ import annotations

from ipaddress import IPv4Address

from magw.desired.globalnet.plan import GatewayTranslations
from magw.desired.nft import expr as x
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet
from magw.model.vtep import INTER_PORT, INTRA_PORT, VX_SUBMARINER

GLOBALNET_MARK = 0xC0000
MARK_MASK = 0xC0000
GLOBAL_EGRESS_MAP = "gn_egress"
IN_MAP = "gn_in"
OUT_MAP = "gn_out"
STATIC_SET = "gn_static"
RAW_PRIORITY = -300
MANGLE_PRIORITY = -150
AFTER_NAT_PRIORITY = 300


def _marked() -> x.Expr:
    return x.match(x.bitand(x.meta("mark"), MARK_MASK), GLOBALNET_MARK)


def _mark_rule(chain: str, remote_set: str) -> NftRule:
    return x.rule(
        chain,
        x.match(x.ip_daddr(), x.set_ref(remote_set)),
        x.mangle(x.meta("mark"), x.bitor(x.meta("mark"), GLOBALNET_MARK)),
        comment="magw globalnet: mark traffic to remote global CIDRs (only marked traffic is SNATed)",
    )


def egress_range(ips: tuple[IPv4Address, ...]) -> tuple[IPv4Address, IPv4Address] | None:
    """First and last address of the first contiguous run of ``ips`` (the controller allocates one run)."""
    if not ips:
        return None
    last = ips[0]
    for ip in ips[1:]:
        if int(ip) != int(last) + 1:
            break
        last = ip
    return ips[0], last


def _cluster_rule(tr: GatewayTranslations) -> NftRule:
    run = egress_range(tr.cluster_egress)
    if run is None:
        return x.rule(
            "postrouting",
            _marked(),
            x.drop(),
            comment="magw globalnet: no cluster egress IPs for this gateway yet, never send local addresses",
        )
    first, last = run
    target: x.Expr | str = str(first) if first == last else x.addr_range(first, last)
    return x.rule(
        "postrouting",
        _marked(),
        x.snat(target),
        comment="magw globalnet: everything else leaves as this gateway's cluster egress IPs",
    )


def gateway_nat_rules(tr: GatewayTranslations) -> list[NftRule]:
    """The Globalnet rules of ``postrouting`` (nat), in precedence order."""
    return [
        x.rule(
            "postrouting",
            _marked(),
            x.match(x.ip_saddr(), x.set_ref(STATIC_SET)),
            x.snat(x.ip_saddr()),
            comment="magw globalnet: one-to-one addresses keep their source here, rewritten statelessly later",
        ),
        x.rule(
            "postrouting",
            _marked(),
            x.snat(x.map_lookup(x.ip_saddr(), GLOBAL_EGRESS_MAP)),
            comment="magw globalnet: pods of a GlobalEgressIP leave as this gateway's address of it",
        ),
        _cluster_rule(tr),
    ]


def gateway_chains() -> list[NftChain]:
    return [
        NftChain(name="prerouting-raw", type="filter", hook="prerouting", priority=RAW_PRIORITY, policy="accept"),
        NftChain(name="prerouting-mark", type="filter", hook="prerouting", priority=MANGLE_PRIORITY, policy="accept"),
        NftChain(name="output-mark", type="filter", hook="output", priority=MANGLE_PRIORITY, policy="accept"),
        NftChain(
            name="postrouting-out", type="filter", hook="postrouting", priority=AFTER_NAT_PRIORITY, policy="accept"
        ),
    ]


def gateway_rules(remote_set: str) -> list[NftRule]:
    """The rules of the Globalnet-only chains (``gateway_chains``)."""
    return [
        x.rule(
            "prerouting-raw",
            x.match(x.ip_saddr(), x.set_ref(remote_set)),
            x.mangle(x.ip_daddr(), x.map_lookup(x.ip_daddr(), IN_MAP)),
            comment="magw globalnet: a global IP of ours becomes its local address before conntrack",
        ),
        _mark_rule("prerouting-mark", remote_set),
        x.rule(
            "output-mark",
            x.udp_dport((INTER_PORT, INTRA_PORT)),
            x.match(x.ip_daddr(), x.set_ref(remote_set), "!="),
            x.mangle(x.meta("mark"), x.bitand(x.meta("mark"), 0xFFFFFFFF ^ MARK_MASK)),
            comment="magw globalnet: the tunnel's outer packets keep the inner mark: clear it (no SNAT of them)",
        ),
        _mark_rule("output-mark", remote_set),
        x.rule(
            "postrouting-out",
            x.match(x.ip_daddr(), x.set_ref(remote_set)),
            x.oifname(VX_SUBMARINER, negate=True),
            x.mangle(x.ip_saddr(), x.map_lookup(x.ip_saddr(), OUT_MAP)),
            comment="magw globalnet: one-to-one local addresses leave as their global IP",
        ),
    ]


def gateway_sets(tr: GatewayTranslations) -> list[NftSet]:
    return [NftSet(name=STATIC_SET, type="ipv4_addr", elements=tr.static)]


def gateway_maps(tr: GatewayTranslations) -> list[NftMap]:
    return [
        NftMap(name=GLOBAL_EGRESS_MAP, type="ipv4_addr", map="ipv4_addr", elements=tr.egress),
        NftMap(name=IN_MAP, type="ipv4_addr", map="ipv4_addr", elements=tuple((g, lo) for lo, g in tr.one_to_one)),
        NftMap(name=OUT_MAP, type="ipv4_addr", map="ipv4_addr", elements=tr.one_to_one),
    ]
