"""How UDP (or TCP) flows between two clusters spread over the gateways, from the tunnels' packet counters.

Counters are read with ``ip -s -j link`` in each gateway namespace before and
after the flows. Requests go from a client pod in cluster A to a server pod in
cluster B, replies come back: every request leaves through exactly one
gateway of A (``vxlan-tunnel`` TX) and enters through exactly one gateway of B
(``vxlan-tunnel`` RX). Wire amplification is the sum over B's gateways of
tunnel RX packets divided by the requests sent: 1.0 when nothing is flooded
to several gateways.

The daemons' own health probes (ICMP echo on both tunnels, docs/health.md)
flow all the time, faster while a peer is in transition, so link counters
would mix them in. Instead every gateway gets a small ``netdev`` table
(``COUNT_TABLE``) whose ingress and egress chains on both tunnel devices count
the flows' datagrams (UDP to or from ``ECHO_PORT``): at the device, before
the IP layer drops a frame that is not for it, so a flooded copy is counted
like a link counter would. It is removed afterwards.

TCP flows (``proto="tcp"``) count only the segments that carry a request or reply (``psh``: the tool sends each
request in one segment), so the counts mean what they mean for UDP, except that a retransmitted segment counts
again (amplification above 1.00 on a lossy path) and replies may share a segment. OVN's ECMP needs them: in Open
vSwitch's userspace datapath its hash (symmetric L4) covers TCP ports but not UDP ports, so all UDP flows between
two pods take one gateway router (docs/ovn.md, "The lab carries packets").
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from magw.lab.build import netns
from magw.lab.spec.layout import ECHO_PORT, ClusterLayout, LabLayout, NodeLayout, PodLayout
from magw.lab.verify.connectivity import udp_flows

TUNNEL = "vxlan-tunnel"
INTRA = "vx-submariner"
COUNT_TABLE = "magw_lab_flows"
_COUNTERS = (("intra_rx", "ingress", INTRA), ("intra_tx", "egress", INTRA),
             ("tunnel_rx", "ingress", TUNNEL), ("tunnel_tx", "egress", TUNNEL))  # fmt: skip


def _count_table(devices: frozenset[str], proto: str = "udp") -> str:
    """Counters of the flows' datagrams (TCP: segments with data) received and sent on each tunnel device of
    ``devices``."""
    counters = "".join(f"  counter {name} {{ }}\n" for name, _h, _d in _COUNTERS)
    data = " tcp flags & psh == psh" if proto == "tcp" else ""
    chains = "".join(
        f'  chain {name} {{\n    type filter hook {hook} device "{dev}" priority -500; policy accept;\n'
        f"    {proto} dport {ECHO_PORT}{data} counter name {name}\n"
        f"    {proto} sport {ECHO_PORT}{data} counter name {name}\n  }}\n"
        for name, hook, dev in _COUNTERS
        if dev in devices
    )
    fresh = f"add table netdev {COUNT_TABLE}\ndelete table netdev {COUNT_TABLE}\n"
    return f"{fresh}table netdev {COUNT_TABLE} {{\n{counters}{chains}}}\n"


@attrs.frozen(kw_only=True)
class GatewayCount:
    gateway: str
    cluster: str
    tunnel_rx: int
    tunnel_tx: int
    intra_rx: int
    intra_tx: int


@attrs.frozen(kw_only=True)
class SpreadResult:
    client: PodLayout
    server: PodLayout
    flows: int
    proto: str
    sent: int
    received: int
    gateways: tuple[GatewayCount, ...]

    def of(self, cluster: str) -> tuple[GatewayCount, ...]:
        return tuple(g for g in self.gateways if g.cluster == cluster)

    @property
    def amplification(self) -> float:
        """Requests entering the server's cluster through any gateway tunnel, per request sent."""
        rx = sum(g.tunnel_rx for g in self.of(self.server.cluster))
        return rx / self.sent if self.sent else 0.0


def _counters(node: NodeLayout) -> dict[str, int]:
    """The flows' datagrams counted so far on the node's tunnels."""
    out = netns.ns_exec(node.namespace, "nft", "-j", "list", "counters", "table", "netdev", COUNT_TABLE)
    counted = {
        c["counter"]["name"]: int(c["counter"]["packets"]) for c in json.loads(out)["nftables"] if "counter" in c
    }
    return {name: counted.get(name, 0) for name, _h, _d in _COUNTERS}


def default_pair(lab: LabLayout) -> tuple[PodLayout, PodLayout]:
    """A client pod in the first cluster and a server pod in the second, on workers when there are any."""
    return _first_worker_pod(lab.clusters[0]), _first_worker_pod(lab.clusters[1])


def _first_worker_pod(cluster: ClusterLayout) -> PodLayout:
    for node in cluster.nodes:
        if not node.gateway:
            return cluster.pods_of(node.name)[0]
    return cluster.pods[0]


def run_spread(
    lab: LabLayout,
    *,
    flows: int = 64,
    packets: int = 10,
    pair: tuple[PodLayout, PodLayout] | None = None,
    timeout: float = 5.0,
    proto: str = "udp",
) -> SpreadResult:
    """Send ``flows`` UDP flows (or TCP connections) of ``packets`` requests between two clusters and count per
    gateway."""
    client, server = pair if pair is not None else default_pair(lab)
    gateways: Sequence[NodeLayout] = [g for g in lab.gateways if g.cluster in (client.cluster, server.cluster)]
    for g in gateways:
        devices = frozenset(d for d in (TUNNEL, INTRA) if netns.link_stats(g.namespace, d) is not None)
        netns.nft_load(g.namespace, _count_table(devices, proto))
    try:
        before = {g.name: _counters(g) for g in gateways}
        summary = udp_flows(
            client.namespace, server.ip, ECHO_PORT, flows=flows, packets=packets, timeout=timeout, proto=proto
        )
        after = {g.name: _counters(g) for g in gateways}
    finally:
        for g in gateways:
            netns.ns_exec(g.namespace, "nft", "delete", "table", "netdev", COUNT_TABLE)
    counts = tuple(
        GatewayCount(
            gateway=g.name, cluster=g.cluster, **{k: after[g.name][k] - before[g.name][k] for k in after[g.name]}
        )
        for g in gateways
    )
    return SpreadResult(
        client=client,
        server=server,
        flows=flows,
        proto=proto,
        sent=int(summary["sent"]),
        received=int(summary["received"]),
        gateways=counts,
    )


def shares(counts: Sequence[int]) -> list[float]:
    """Each count's part of their sum (0.0 each when the sum is 0)."""
    total = sum(counts)
    return [c / total if total else 0.0 for c in counts]


def spread_text(result: SpreadResult) -> str:
    """A table of per-gateway tunnel packets, each count with its share of that column within the gateway's
    cluster (tx: what the cluster's gateways sent into the tunnels, rx: what they received), and the wire
    amplification."""
    client, server = result.client, result.server
    lines = [
        f"{result.flows} {result.proto.upper()} flows {client.name} ({client.ip}) -> {server.name} ({server.ip}): "
        f"{result.sent} requests sent, {result.received} replies received",
        f"{'gateway':<14} {'tunnel tx':>10} {'share':>6} {'tunnel rx':>10} {'share':>6}",
    ]
    for cluster in dict.fromkeys((result.client.cluster, result.server.cluster)):
        gws = result.of(cluster)
        tx_shares = shares([g.tunnel_tx for g in gws])
        rx_shares = shares([g.tunnel_rx for g in gws])
        for g, tx, rx in zip(gws, tx_shares, rx_shares, strict=True):
            lines.append(f"{g.gateway:<14} {g.tunnel_tx:>10} {tx:>6.0%} {g.tunnel_rx:>10} {rx:>6.0%}")
    lines.append(f"wire amplification: {result.amplification:.2f} (1.00 = each request crossed one gateway)")
    return "\n".join(lines)
