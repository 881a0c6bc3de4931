"""How the planner's time grows with cluster size: prints times and log-log slopes.

Usage: .venv/bin/python benchmarks/plan_scale.py [--repeat N] [--skip-nodes]

For a gateway and a worker node it times ``plan(snapshot, node)`` at 100, 1,000
and 10,000 local nodes (10 remote clusters) and at 1, 10 and 50 remote clusters
(1,000 local nodes), each remote cluster with 2 gateways and 4 CIDRs.

The CIDR axis (docs/performance.md) starts from YAML text, as ``magw plan`` does: 100 remote
clusters with 10, 100 and 1,000 CIDRs each (1k, 10k, 100k CIDRs in all, the
snapshot of ``benchmarks/bigsnap.py``), timing ``parse_snapshot_text`` (load and
checks), ``plan`` and the two together for the gateway ``gw1`` and the worker ``w1``.

The slope
of log(time) over log(size) is the growth exponent: the target is linear growth
(slope <= 1.1). A worker's plan does not depend on the number of local nodes
(it peers only with gateways), so its slope over nodes is about 0.
Nothing here touches the network: the planner is pure.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from ipaddress import IPv4Address, IPv4Network

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bigsnap import snapshot_text  # after sys.path
from magw.desired.node.planner import plan  # after sys.path
from magw.model import Cluster, Config, Endpoint, Node, Snapshot  # after sys.path
from magw.snapshot.load import parse_snapshot_text  # after sys.path

CIDR_REMOTES = 100

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
    return best_of(repeat, lambda: plan(snap, node))


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
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


def cidr_series(per_cluster: Sequence[int], repeat: int) -> None:
    """Load (YAML text to checked Snapshot), plan, and both, over CIDRs per remote cluster."""
    sizes = [n * CIDR_REMOTES for n in per_cluster]
    texts = [snapshot_text(size, CIDR_REMOTES) for size in sizes]
    snaps = [parse_snapshot_text(t) for t in texts]
    load = [best_of(repeat, lambda t=t: parse_snapshot_text(t)) for t in texts]  # type: ignore[misc]
    _line("CIDRs: load", "-", sizes, load)
    for role, node in (("gateway", "gw1"), ("worker", "w1")):
        planned = [best_of(repeat, lambda s=s, n=node: plan(s, n)) for s in snaps]  # type: ignore[misc]
        _line("CIDRs: plan", role, sizes, planned)
        _line("CIDRs: load+plan", role, sizes, [a + b for a, b in zip(load, planned, strict=True)])


def _line(label: str, role: str, sizes: Sequence[int], times: Sequence[float]) -> None:
    cells = "  ".join(f"{size:>6}: {t * 1000:8.1f} ms" for size, t in zip(sizes, times, strict=True))
    print(f"{label:<16} {role:<8} {cells}   slope {slope(sizes, times):5.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per point; the best is kept (default 3)")
    parser.add_argument("--skip-nodes", action="store_true", help="only the CIDR axis")
    parser.add_argument(
        "--cidrs-per-cluster", default="10,100,1000", help="CIDRs per remote cluster, 100 remote clusters"
    )
    args = parser.parse_args()
    with open("/proc/loadavg", encoding="ascii") as f:
        print(f"load average at start: {' '.join(f.read().split()[:3])} (the machine may be shared)", flush=True)
    if not args.skip_nodes:
        node_sizes = [100, 1_000, 10_000]
        series("nodes (10 rem.)", node_sizes, [snapshot(n, 10) for n in node_sizes], args.repeat)
        remote_sizes = [1, 10, 50]
        series("remotes (1k n.)", remote_sizes, [snapshot(1_000, r) for r in remote_sizes], args.repeat)
    cidr_series([int(n) for n in args.cidrs_per_cluster.split(",") if n], args.repeat)
    print("target: slope <= 1.1 (linear); a worker's plan is independent of the number of local nodes")


if __name__ == "__main__":
    main()
