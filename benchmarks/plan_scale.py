"""How the planner's time grows with cluster size: prints times and log-log slopes.

Usage: .venv/bin/python benchmarks/plan_scale.py [--repeat N]

For a gateway and a worker node it times ``plan(snapshot, node)`` at 100, 1,000
and 10,000 local nodes (10 remote clusters) and at 1, 10 and 50 remote clusters
(1,000 local nodes), each remote cluster with 2 gateways and 4 CIDRs. The slope
of log(time) over log(size) is the growth exponent: the target is linear growth
(slope <= 1.1). A worker's plan does not depend on the number of local nodes
(it peers only with gateways), so its slope over nodes is about 0.
Nothing here touches the network: the planner is pure.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network

from magw.desired.planner import plan
from magw.model import Cluster, Config, Endpoint, Node, Snapshot

LOCAL_GATEWAYS = 4
REMOTE_GATEWAYS = 2


def _ip(base: int, index: int) -> IPv4Address:
    return IPv4Address(base + index + 2)


def snapshot(nodes: int, remotes: int) -> Snapshot:
    """A clusterset: local cluster c0 with ``nodes`` nodes, ``remotes`` remote clusters."""
    underlay = int(IPv4Address("172.16.0.0"))
    local_nodes = [
        Node(
            name=f"n{i}",
            ip=_ip(underlay, i),
            cni_ip=IPv4Address(int(IPv4Address("10.0.0.1")) + (i << 8)),
            gateway=i < LOCAL_GATEWAYS,
        )
        for i in range(nodes)
    ]
    clusters = [Cluster(id="c0", pod_cidrs=[IPv4Network("10.0.0.0/12")], service_cidrs=[IPv4Network("100.0.0.0/16")])]
    endpoints = [Endpoint(cluster="c0", hostname=n.name, private_ip=n.ip) for n in local_nodes[:LOCAL_GATEWAYS]]
    for r in range(1, remotes + 1):
        clusters.append(
            Cluster(
                id=f"c{r}",
                pod_cidrs=[IPv4Network(f"10.{16 + r}.0.0/16"), IPv4Network(f"10.{80 + r}.0.0/16")],
                service_cidrs=[IPv4Network(f"100.{r}.0.0/16"), IPv4Network(f"100.{100 + r}.0.0/16")],
            )
        )
        for g in range(REMOTE_GATEWAYS):
            endpoints.append(
                Endpoint(cluster=f"c{r}", hostname=f"c{r}-gw{g}", private_ip=IPv4Address(f"172.31.{r}.{g + 2}"))
            )
    return Snapshot(local_cluster="c0", clusters=clusters, nodes=local_nodes, endpoints=endpoints, config=Config())


def best_time(snap: Snapshot, node: str, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        plan(snap, node)
        best = min(best, time.perf_counter() - start)
    return best


def slope(sizes: Sequence[int], times: Sequence[float]) -> float:
    """Least-squares slope of log(time) over log(size)."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(t) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def series(label: str, sizes: Sequence[int], snaps: Sequence[Snapshot], repeat: int) -> None:
    for role, node in (("gateway", "n0"), ("worker", f"n{LOCAL_GATEWAYS}")):
        times = [best_time(s, node, repeat) for s in snaps]
        cells = "  ".join(f"{size:>6}: {t * 1000:8.2f} ms" for size, t in zip(sizes, times, strict=True))
        print(f"{label:<16} {role:<8} {cells}   slope {slope(sizes, times):5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per point; the best is kept (default 3)")
    args = parser.parse_args()
    node_sizes = [100, 1_000, 10_000]
    series("nodes (10 rem.)", node_sizes, [snapshot(n, 10) for n in node_sizes], args.repeat)
    remote_sizes = [1, 10, 50]
    series("remotes (1k n.)", remote_sizes, [snapshot(1_000, r) for r in remote_sizes], args.repeat)
    print("target: slope <= 1.1 (linear); a worker's plan is independent of the number of local nodes")


if __name__ == "__main__":
    main()
