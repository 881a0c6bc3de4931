"""The egress gateway's nftables table ``ip magw-egress`` (pure): steering, ingress DNAT, hairpin, SNAT.

docs/egress-datapath.md walks packets through it. The chains, and why:

- ``prerouting-raw`` (filter, raw -300, every node): a bound pod's packet that leaves the cluster gets the
  steer mark of its VIP (read by the VIP's ip rule) and is not tracked; so is a packet from outside to a bound
  pod. Tracking and NAT happen on the holder only, on the decapsulated packet (``iifname magw-egress``),
  which returns first. A packet to a local address is never steered (NodeLocal DNS, a VIP of this node).
- ``prerouting-nat`` (nat, dstnat -10, candidates): a connection to a VIP this node holds (``fib daddr type
  local``) is marked *hairpin* when it comes from inside the cluster (decapsulated, or from a cluster
  address), *ingress* otherwise, and DNATed to the Service's backends.
- ``forward`` (filter, mangle -150, every node): our mark bits are cleared on packets entering the tunnel
  (the tunnel's own route lookup for the VIP sees the mark and would loop); TCP MSS is clamped into the
  tunnel and on ingress SYNs.
- ``input`` (filter, 0, candidates with conntrack sync): conntrackd's sync (UDP 3780, unauthenticated) only from
  the cluster's nodes (set ``sync_peers``): anyone else could fill a backup's cache with made-up connections,
  committed to the kernel when it takes a VIP (docs/security.md).
- ``postrouting`` (nat, srcnat -10, candidates, before a CNI masquerade at srcnat): hairpin to the source
  pod's own VIP, or to the VIP reached; ingress keeps the client's address (a null SNAT, so a CNI masquerade
  cannot run); egress from the tunnel to the pod's VIP.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address

from magw.desired.egressgw.numbers import CONNTRACKD_PORT, EGRESSGW_DEV, HAIRPIN, INGRESS, KIND_MASK, MARK_MASK
from magw.desired.nft import expr as x
from magw.desired.nft.values import NftRule

RAW_PRIORITY = -300
DNAT_PRIORITY = -110
MANGLE_PRIORITY = -150
SNAT_PRIORITY = 90
EXCLUDED_SET = "excluded"
BOUND_SET = "bound"
VIPS_SET = "vips"
SYNC_PEERS_SET = "sync_peers"
_ALL = 0xFFFFFFFF


def pods_set(vrid: int) -> str:
    """The set of the pod IPs that use VIP ``vrid``."""
    return f"pods_{vrid}"


def set_mark(value: int) -> x.Expr:
    """``meta mark set meta mark & ~MARK_MASK | value``, in the shape nft prints back (it folds ``value`` into
    the AND mask: ``(m & a) | v == (m & (a | v)) | v``)."""
    keep = (_ALL & ~MARK_MASK) | value
    return x.mangle(x.meta("mark"), x.bitor(x.bitand(x.meta("mark"), keep), value))


def clear_mark() -> x.Expr:
    return x.mangle(x.meta("mark"), x.bitand(x.meta("mark"), _ALL & ~MARK_MASK))


def kind_is(kind: int, *, negate: bool = False) -> x.Expr:
    return x.match(x.bitand(x.meta("mark"), KIND_MASK), kind, "!=" if negate else "==")


def fib_daddr_local(*, negate: bool = False) -> x.Expr:
    return x.match({"fib": {"result": "type", "flags": ["daddr"]}}, "local", "!=" if negate else "==")


def notrack() -> x.Expr:
    return {"notrack": None}


def ct_original_daddr() -> x.Expr:
    return {"ct": {"key": "ip daddr", "dir": "original"}}


def raw_rules(vrids: Sequence[tuple[int, int]]) -> list[NftRule]:
    """``prerouting-raw``; ``vrids``: (vrid, steer mark) of every VIP, in vrid order."""
    chain = "prerouting-raw"
    rules = [
        x.rule(chain, x.iifname(EGRESSGW_DEV), x.return_(), comment="magw egress: decapsulated on the holder"),
        x.rule(chain, fib_daddr_local(), x.return_(), comment="magw egress: never steer to a local address"),
    ]
    for vrid, mark in vrids:
        rules.append(
            x.rule(
                chain,
                x.match(x.ip_saddr(), x.set_ref(pods_set(vrid))),
                x.match(x.ip_daddr(), x.set_ref(EXCLUDED_SET), "!="),
                set_mark(mark),
                notrack(),
                comment=f"magw egress: steer to the holder of VIP {vrid}, untracked here",
            )
        )
    rules.append(
        x.rule(
            chain,
            x.match(x.ip_daddr(), x.set_ref(BOUND_SET)),
            x.match(x.ip_saddr(), x.set_ref(EXCLUDED_SET), "!="),
            notrack(),
            comment="magw egress: from outside to a bound pod, untracked here (tracked on the holder)",
        )
    )
    return rules


def dnat_classify_rules() -> list[NftRule]:
    """The head of ``prerouting-nat``: only VIPs held here, then the hairpin/ingress mark."""
    chain = "prerouting-nat"
    return [
        x.rule(chain, x.match(x.ip_daddr(), x.set_ref(VIPS_SET), "!="), x.return_()),
        x.rule(chain, fib_daddr_local(negate=True), x.return_(), comment="magw egress: a VIP this node holds"),
        x.rule(chain, x.iifname(EGRESSGW_DEV), set_mark(HAIRPIN), comment="magw egress: hairpin from a bound pod"),
        x.rule(
            chain,
            x.match(x.ip_saddr(), x.set_ref(EXCLUDED_SET)),
            set_mark(HAIRPIN),
            comment="magw egress: hairpin from inside the cluster",
        ),
        x.rule(chain, kind_is(HAIRPIN, negate=True), set_mark(INGRESS), comment="magw egress: ingress"),
    ]


def dnat_rule(vip: IPv4Address, proto: str, port: int, backends: Sequence[IPv4Address], target: int) -> NftRule:
    """``ip daddr VIP PROTO dport PORT dnat to BACKEND(S):TARGET`` (several: ``numgen random``, as kube-proxy)."""
    if len(backends) == 1:
        dest: x.Expr | str = str(backends[0])
    else:
        pairs = [[i, str(b)] for i, b in enumerate(backends)]
        dest = {
            "map": {"key": {"numgen": {"mode": "random", "mod": len(backends), "offset": 0}}, "data": {"set": pairs}}
        }
    return x.rule(
        "prerouting-nat",
        x.match(x.ip_daddr(), str(vip)),
        x.match(x.payload(proto, "dport"), port),
        x.dnat(dest, target),
    )


def forward_rules(ingress_mss: int | None) -> list[NftRule]:
    """``forward``; ``ingress_mss`` None on nodes that are no candidate (no ingress there)."""
    rules = [
        x.rule("forward", x.oifname(EGRESSGW_DEV), clear_mark(), comment="magw egress: the tunnel must not see it"),
        x.rule(
            "forward",
            x.oifname(EGRESSGW_DEV),
            x.tcp_flags("syn", ("syn", "rst")),
            x.mss_clamp_to_pmtu(),
            comment="magw egress: clamp TCP MSS into the tunnel",
        ),
    ]
    if ingress_mss is not None:
        rules.append(
            x.rule(
                "forward",
                kind_is(INGRESS),
                x.tcp_flags("syn", ("syn", "rst")),
                x.mangle(x.tcp_option("maxseg", "size"), ingress_mss),
                comment="magw egress: clamp ingress TCP MSS (the backend replies through the tunnel)",
            )
        )
    return rules


def snat_rules(held: Sequence[tuple[int, IPv4Address]]) -> list[NftRule]:
    """``postrouting`` of a candidate; ``held``: (vrid, VIP) of the VIPs it may hold, in vrid order."""
    chain = "postrouting"
    rules = [
        x.rule(
            chain,
            kind_is(HAIRPIN),
            x.match(x.ip_saddr(), x.set_ref(pods_set(vrid))),
            x.snat(vip),
            comment=f"magw egress: hairpin from a pod of VIP {vrid} leaves as that VIP",
        )
        for vrid, vip in held
    ]
    rules += [
        x.rule(chain, kind_is(HAIRPIN), x.snat(ct_original_daddr()), comment="magw egress: hairpin leaves as the VIP"),
        x.rule(chain, kind_is(INGRESS), x.snat(x.ip_saddr()), comment="magw egress: ingress keeps the client address"),
    ]
    rules += [
        x.rule(
            chain,
            x.iifname(EGRESSGW_DEV),
            x.match(x.ip_saddr(), x.set_ref(pods_set(vrid))),
            x.match(x.ip_daddr(), x.set_ref(EXCLUDED_SET), "!="),
            x.snat(vip),
            comment=f"magw egress: pods of VIP {vrid} leave as {vip}",
        )
        for vrid, vip in held
    ]
    return rules


def commit_guard_rules() -> list[NftRule]:
    """``prerouting-guard`` of a candidate, with conntrack sync: a TCP segment that is no SYN and finds no
    conntrack entry is dropped when it is for a VIP (from outside) or comes out of the tunnel (from a pod: an
    egress flow's, or a backend's reply on an ingress flow). Between the GARP that brings a VIP here and
    conntrackd's commit of the synced flows (tens to hundreds of ms), such a segment of an established flow
    would otherwise open a fresh entry: for the VIP this host's own RST; from the tunnel an entry that a loose
    pickup NATed on its own, which the commit of the synced one then clashes with, and the flow stalls or is
    reset (docs/egress-ha.md, "the GARP-to-commit window"). Dropped, the segment is retransmitted and meets the
    committed entry. Without conntrack sync nothing will be committed: no guard."""
    return [
        _guard_rule(x.match(x.ip_daddr(), x.set_ref(VIPS_SET)), "no RST before conntrackd's commit"),
        _guard_rule(x.iifname(EGRESSGW_DEV), "no pickup of a pod's segment before conntrackd's commit"),
    ]


def _guard_rule(where: x.Expr, why: str) -> NftRule:
    """``WHERE tcp flags & (syn | ack) != syn ct state new drop``."""
    return x.rule(
        "prerouting-guard",
        where,
        x.match(x.bitand(x.payload("tcp", "flags"), ["syn", "ack"]), "syn", "!="),
        x.flags_in(x.ct("state"), "new"),
        x.drop(),
        comment=f"magw egress: {why}",
    )


def sync_guard_rules() -> list[NftRule]:
    """``input`` of a candidate with conntrack sync: conntrackd's UDP port only from the cluster's nodes."""
    return [
        x.rule(
            "input",
            x.udp_dport(CONNTRACKD_PORT),
            x.match(x.ip_saddr(), x.set_ref(SYNC_PEERS_SET), "!="),
            x.drop(),
            comment="magw egress: conntrackd sync only from the cluster's nodes",
        )
    ]
