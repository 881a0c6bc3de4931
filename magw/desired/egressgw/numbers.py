"""The egress gateway's kernel numbers, declared once (pure): device, port, marks, tables, rule priorities.

docs/egress-datapath.md explains each choice; the netlink driver's ownership (magw.drivers.netlink.constants)
is built from these.

Marks: the egress gateway uses the bits ``0x000030ff`` of the packet mark and nothing else, always set with
a mask (``meta mark set meta mark & ~0x30ff | V``). The field ``0x3000`` says what a mark means:

- ``0x1000 | vrid`` (vrid in ``0x00ff``): *steer* this bound pod's packet to the holder of VIP ``vrid``
  (read by ip rule ``fwmark 0x10VV/0x30ff``; cleared in ``forward`` before the packet enters the tunnel);
- ``0x2000``: *ingress*, a connection from outside DNATed to a bound Service's backend: never SNATed;
- ``0x3000``: *hairpin*, a connection from inside the cluster to a VIP: SNATed to the source pod's own VIP
  (a bound pod) or to the VIP it reached (anything else), so the reply comes back through the holder.

Kube-proxy (0x4000 masquerade, 0x8000 drop), Calico (0xffff0000 by default), Cilium (0x0f00 magic and the
upper 16 bits), Globalnet (0xc0000) and Istio's 0x0539 never put a 1 in ``0x3000``, so none of their marks
can match our rule or our chains.
"""

from __future__ import annotations

EGRESSGW_DEV = "magw-egress"
EGRESSGW_PORT = 4801  # VXLAN-GPE; 4789/8472 are Calico's/Flannel's, 4500/4800 Submariner's, 4790 GPE's default
GPE_OVERHEAD = 36  # outer IPv4 20 + UDP 8 + VXLAN-GPE 8; no inner Ethernet header
CONNTRACKD_PORT = 3780  # conntrackd's FTFW sync between a VIP's candidates (magw.drivers.conntrackd.config)
DEVICE_ADDRESS = "169.254.240.1/32"  # loose rp_filter refuses a device without any IPv4 address

MARK_MASK = 0x30FF
KIND_MASK = 0x3000
VRID_MASK = 0x00FF
STEER = 0x1000
INGRESS = 0x2000
HAIRPIN = 0x3000

# One routing table and one rule per VIP: table and priority 12000 + vrid (vrid 1..255).
TABLE_BASE = 12000
RULE_BASE = 12000
MIN_VRID = 1
MAX_VRID = 255
EGRESSGW_TABLES: frozenset[int] = frozenset(range(TABLE_BASE + MIN_VRID, TABLE_BASE + MAX_VRID + 1))
EGRESSGW_RULE_PRIORITIES: frozenset[int] = frozenset(range(RULE_BASE + MIN_VRID, RULE_BASE + MAX_VRID + 1))


def steer_mark(vrid: int) -> int:
    if not MIN_VRID <= vrid <= MAX_VRID:
        raise ValueError(f"vrid {vrid} is not in {MIN_VRID}..{MAX_VRID}")
    return STEER | vrid
