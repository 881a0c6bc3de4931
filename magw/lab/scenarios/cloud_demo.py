"""``magw lab demo --load-balancer``: the gateways behind each cluster's cloud, and a gateway's power loss with
magw's failover set beside the moment the cloud's own health check took the gateway out (docs/load-balancer.md)."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.observe import cloud
from magw.lab.scenarios import failure
from magw.lab.scenarios.failover import FailoverResult, measure_failover
from magw.lab.spec.cloud import NAT_PORTS
from magw.lab.spec.layout import ClusterLayout, LabLayout

Output = Callable[[str], None]
FLOWS = 32
RATE = 200


def listeners_text(lab: LabLayout) -> str:
    """Per cluster: its public address, and each gateway's listener on it."""
    lines = []
    for c in lab.clusters:
        if c.cloud is None:
            continue
        ports = ", ".join(f"{g.name} at :{g.public_port}" for g in c.gateways)
        lines.append(f"{c.id}: public {c.cloud.public_ip} (no gateway has an address of its own): {ports}; "
                     f"leaving through NAT {c.cloud.nat_ip}")  # fmt: skip
    return "\n".join(lines)


def nat_text(c: ClusterLayout) -> str:
    """What the cluster's NAT did to the gateways' outgoing cable packets: how many, and one example."""
    assert c.cloud is not None
    nat = c.cloud.nat_ip
    out = [t for t in cloud.translations(c.cloud.namespace) if t.out_src == nat and t.orig_src != nat]
    rewritten = [t for t in out if t.out_sport != t.orig_sport and NAT_PORTS[0] <= t.out_sport <= NAT_PORTS[1]]
    if not out:
        return f"{c.id}: no outgoing translation in the cloud's conntrack table"
    t = rewritten[0] if rewritten else out[0]
    return (f"{c.id}: {len(rewritten)}/{len(out)} outgoing UDP flows left with a rewritten source port, e.g. "
            f"{t.orig_src}:{t.orig_sport} -> {t.out_src}:{t.out_sport} (to {t.orig_dst}:{t.orig_dport})")  # fmt: skip


@attrs.frozen(kw_only=True)
class CloudFailover:
    result: FailoverResult
    cloud_down_after: float | None  # seconds from the power cut to the cloud's health check taking it out


def fail_behind_cloud(
    lab: LabLayout,
    st: LabState,
    *,
    victim: str,
    wait: float,
    flows: int = FLOWS,
    rate: int = RATE,
    duration: float = 6.0,
) -> CloudFailover:
    """Stream (``duration`` s) from the victim's cluster to the next one, cut the victim's power 1.5 s in, wait
    (at most ``wait`` s) for its cloud to take it out; the victim is recovered before returning."""
    node = lab.node(victim)
    here = lab.cluster(node.cluster)
    there = next(c for c in lab.clusters if c.id != here.id)
    client = next(p for p in here.pods if not lab.node(p.node).gateway)
    server = next(p for p in there.pods if not lab.node(p.node).gateway)
    try:
        result = measure_failover(lab, st, victim=victim, client=client, server=server, flows=flows, rate=rate,
                                  duration=duration, fail_at=1.5)  # fmt: skip
        deadline = time.monotonic() + wait
        down = None
        while down is None and time.monotonic() < deadline:
            events = cloud.health_events(st, here.id)
            down = next((e for e in events if e.kind == "down" and e.backend == node.node_ip
                         and e.t >= result.failed_at), None)  # fmt: skip
            time.sleep(0.2)
    finally:
        failure.recover(st.name, victim)
    return CloudFailover(result=result, cloud_down_after=None if down is None else down.t - result.failed_at)


def run_cloud_section(lab: LabLayout, st: LabState, out: Output) -> bool:
    """The demo's cloud part; True when magw moved the dead gateway's flows before the cloud noticed."""
    spec = lab.topology.load_balancer
    if spec is None:
        raise LabError("the lab has no load_balancer")
    out("\n== behind the cloud (a load balancer with a port per gateway, a NAT that rewrites ports)")
    out(listeners_text(lab))
    for c in lab.clusters:
        out(nat_text(c))
    victim = lab.clusters[0].gateways[0].name
    bound = spec.health_interval * (spec.unhealthy_threshold + 1) + 5
    out(f"\n== {victim} loses power: magw's probes against the cloud's health check (every "
        f"{spec.health_interval:g} s, out after {spec.unhealthy_threshold} failures)")  # fmt: skip
    cf = fail_behind_cloud(lab, st, victim=victim, wait=bound)
    s = cf.result.summary()
    out(f"magw: {s['crossed_victim']}/{s['flows']} flows crossed {victim}; their loss window p50 "
        f"{s['window_p50_ms']} ms, max {s['window_max_ms']} ms; flows that did not cross it lost "
        f"{s['lost_on_untouched']} datagrams")  # fmt: skip
    if cf.cloud_down_after is None:
        out(f"cloud: had not taken {victim} out {bound:g} s after the power cut")
        return False
    out(f"cloud: took {victim} out of its listener {cf.cloud_down_after:.1f} s after the power cut")
    return float(s["window_max_ms"]) / 1000 < cf.cloud_down_after and s["lost_on_untouched"] == 0
