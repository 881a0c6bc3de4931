"""How UDP flows between two clusters spread over the gateways, from the tunnels' packet counters.

Counters are read with ``ip -s -j link`` in each gateway namespace before and
after the flows. Requests go from a client pod in cluster A to a server pod in
cluster B, replies come back: every request leaves through exactly one
gateway of A (``vxlan-tunnel`` TX) and enters through exactly one gateway of B
(``vxlan-tunnel`` RX). Wire amplification is the sum over B's gateways of
tunnel RX packets divided by the requests sent: 1.0 when nothing is flooded
to several gateways.

The daemons' own health probes (ICMP echo on both tunnels, docs/health.md)
flow all the time. For the measurement every gateway gets a small nft table
counting the ICMP packets on the tunnels (``PROBE_TABLE``), read together with
the link counters and subtracted from them; it is removed afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from magw.lab import netns
from magw.lab.connectivity import udp_flows
from magw.lab.layout import ECHO_PORT, ClusterLayout, LabLayout, NodeLayout, PodLayout

TUNNEL = "vxlan-tunnel"
INTRA = "vx-submariner"
PROBE_TABLE = "magw-lab-probes"
_PROBE_COUNTERS = (("intra_rx", "iifname", INTRA), ("intra_tx", "oifname", INTRA),
                   ("tunnel_rx", "iifname", TUNNEL), ("tunnel_tx", "oifname", TUNNEL))  # fmt: skip


def _probe_table() -> str:
    """Counters of the ICMP packets (the health probes) received and sent on both tunnels."""
    counters = "".join(f"  counter {name} {{ }}\n" for name, _m, _d in _PROBE_COUNTERS)
    rules: dict[str, list[str]] = {"prerouting": [], "postrouting": []}
    for name, match, dev in _PROBE_COUNTERS:
        hook = "prerouting" if match == "iifname" else "postrouting"
        rules[hook].append(f'    {match} "{dev}" meta l4proto icmp counter name {name}\n')
    chains = "".join(
        f"  chain {hook} {{\n    type filter hook {hook} priority -400; policy accept;\n{''.join(lines)}  }}\n"
        for hook, lines in rules.items()
    )
    return (
        f"add table ip {PROBE_TABLE}\ndelete table ip {PROBE_TABLE}\ntable ip {PROBE_TABLE} {{\n{counters}{chains}}}\n"
    )


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


def _probes(node: NodeLayout) -> dict[str, int]:
    doc = json.loads(netns.ns_exec(node.namespace, "nft", "-j", "list", "counters", "table", "ip", PROBE_TABLE))
    return {c["counter"]["name"]: int(c["counter"]["packets"]) for c in doc["nftables"] if "counter" in c}


def _counters(node: NodeLayout) -> dict[str, int]:
    """Packets on the tunnels that are not health probes."""
    out = {}
    before = _probes(node)
    for dev, prefix in ((TUNNEL, "tunnel"), (INTRA, "intra")):
        stats = netns.link_stats(node.namespace, dev) or {}
        out[f"{prefix}_rx"] = stats.get("rx_packets", 0)
        out[f"{prefix}_tx"] = stats.get("tx_packets", 0)
    after = _probes(node)
    # The probes counted between the two nft reads around the link read: take the middle.
    return {k: v - round((before.get(k, 0) + after.get(k, 0)) / 2) for k, v in out.items()}


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
) -> SpreadResult:
    """Send ``flows`` UDP flows of ``packets`` requests between two clusters and count per gateway."""
    client, server = pair if pair is not None else default_pair(lab)
    gateways: Sequence[NodeLayout] = [g for g in lab.gateways if g.cluster in (client.cluster, server.cluster)]
    for g in gateways:
        netns.nft_load(g.namespace, _probe_table())
    try:
        before = {g.name: _counters(g) for g in gateways}
        summary = udp_flows(client.namespace, server.ip, ECHO_PORT, flows=flows, packets=packets, timeout=timeout)
        after = {g.name: _counters(g) for g in gateways}
    finally:
        for g in gateways:
            netns.ns_exec(g.namespace, "nft", "delete", "table", "ip", PROBE_TABLE)
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
        sent=int(summary["sent"]),
        received=int(summary["received"]),
        gateways=counts,
    )


def spread_text(result: SpreadResult) -> str:
    """A table of per-gateway tunnel packets and shares, and the wire amplification."""
    lines = [
        f"{result.flows} UDP flows {result.client.name} ({result.client.ip}) -> {result.server.name} "
        f"({result.server.ip}): {result.sent} requests sent, {result.received} replies received",
        f"{'gateway':<14} {'tunnel tx':>10} {'tunnel rx':>10} {'share':>6}",
    ]
    for cluster, direction in ((result.client.cluster, "tx"), (result.server.cluster, "rx")):
        gws = result.of(cluster)
        total = sum(getattr(g, f"tunnel_{direction}") for g in gws) or 1
        for g in gws:
            share = getattr(g, f"tunnel_{direction}") / total
            lines.append(f"{g.gateway:<14} {g.tunnel_tx:>10} {g.tunnel_rx:>10} {share:>6.0%}")
    lines.append(f"wire amplification: {result.amplification:.2f} (1.00 = each request crossed one gateway)")
    return "\n".join(lines)
