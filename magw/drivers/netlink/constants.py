"""What we own in the kernel's routing state. Declared once, here.

Routes carry our own protocol number, so foreign routes in the same tables are
never touched. Nexthop ids come from ``magw.desired.node.ids`` (the planner allocates
them); rules are ours by priority.
"""

from __future__ import annotations

from magw.desired.egressgw.numbers import EGRESSGW_DEV, EGRESSGW_RULE_PRIORITIES, EGRESSGW_TABLES
from magw.desired.node.clientip import CLIENT_IP_RULE_PRIORITIES, CLIENT_IP_TABLES
from magw.desired.node.ids import NEXTHOP_ID_MAX, NEXTHOP_ID_MIN

# RTPROT value written on every route we install ("proto 157" in `ip route`).
# 157 is unassigned in iproute2's rt_protos and in the kernel's rtnetlink.h.
RTPROT_MAGW = 157

# Tables whose magw-protocol routes we own: main, gateway (100), OVN ingress (149), host network (150), and the
# egress gateway's one table per VIP (12001..12255, magw.desired.egressgw.numbers), and keep_client_ip's steer and
# return tables (11000..11014, magw.desired.node.clientip).
OWNED_TABLES: frozenset[int] = frozenset({254, 100, 149, 150}) | EGRESSGW_TABLES | CLIENT_IP_TABLES

# ip rule priorities we own: the gateway table (100); OVN: remote ingress (149, ``iif vxlan-tunnel``) and the
# host network of workers (150), Submariner's priorities for those tables.
# The egress gateway: one ``fwmark`` rule per VIP at 12001..12255. keep_client_ip: ``fwmark`` rules at 85..99.
OWNED_RULE_PRIORITIES: frozenset[int] = (
    frozenset({100, 149, 150}) | EGRESSGW_RULE_PRIORITIES | CLIENT_IP_RULE_PRIORITIES
)
# Priorities we share: there a rule is ours only when it carries RTPROT_MAGW, and others' rules are left alone
# (keep_client_ip's 85..99 sit where other software puts rules too, e.g. Calico's WireGuard rule at 99).
SHARED_RULE_PRIORITIES: frozenset[int] = CLIENT_IP_RULE_PRIORITIES

# Link names we create (magw-egress: the egress gateway's VXLAN-GPE device).
OWNED_LINKS: frozenset[str] = frozenset({"vx-submariner", "vxlan-tunnel", EGRESSGW_DEV})

# Devices whose IPv4 addresses are all ours: our links, and OVN's ``ovn-k8s-sub0`` (the internal port of
# ``br-submariner``, made by magw.drivers.ovs; the netlink driver never creates or deletes that device).
OWNED_ADDRESS_DEVICES: frozenset[str] = OWNED_LINKS | {"ovn-k8s-sub0"}


def owns_nexthop(nh_id: int) -> bool:
    return NEXTHOP_ID_MIN <= nh_id <= NEXTHOP_ID_MAX
