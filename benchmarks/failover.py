"""Benchmark: gateway failover in a lab, per spreading strategy, with real paced UDP flows.

For each strategy (default: resilient, then multipath) a lab is built (two clusters,
``--gateways`` gateways and one worker each), ``--flows`` UDP flows of ``--rate``
datagrams/s run from east's worker pod to west's worker pod through a reflector, and
east-gw1 loses power (links down, daemons SIGKILLed) ``--fail-at`` seconds in. Then the
gateway comes back mid-stream (recovery row). ``--single`` adds single-gateway mode:
the active gateway dies and the standby takes over.

Per run it prints: the loss window of the flows that lost anything (p50, max, and p50
over the 300 ms target), the share of flows with any loss, of flows that crossed the
failed gateway in either direction, of flows that moved gateway in either direction
(from nft sets in every gateway, not from a model) and that over the crossed share
(1.00: only the flows that had to move did), the share that moved in the forward
direction alone and that times N (1.00: exactly 1/N moved), the datagrams lost by
flows that never crossed the failed gateway (target: 0), and the share of the scheduled
datagrams the senders sent (below 100%: their CPU was starved, e.g. by other work on the
machine, and they stopped on time with fewer datagrams; the figures are less sure). Flows hash independently in
each direction, so about 1 - (1 - 1/N)^2 of them cross a given gateway at all.
Targets: window <= 300 ms, about 1/N of the flows moved per direction with resilient
groups, 0 loss on untouched flows.

Run as root: ``.venv/bin/python benchmarks/failover.py [--flows 64 --rate 100 --gateways 4]``.
The default rate, 100 datagrams/s per flow (a 10 ms resolution of the loss window), is what
a 2-CPU machine carries through the lab's namespaces and tunnels both ways: at 1,000/s per
flow the senders managed only 12-24% of their schedule there. The ``sent`` column tells.
Every lab has a unique name and is removed in ``finally``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable

import structlog

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from magw.lab.build import lifecycle as build
from magw.lab.build.state import LabState  # after sys.path
from magw.lab.planes.daemons import agent_status  # after sys.path
from magw.lab.scenarios import failure  # after sys.path
from magw.lab.scenarios.failover import FailoverResult, measure_failover, measure_recovery  # after sys.path
from magw.lab.spec.layout import LabLayout, layout  # after sys.path
from magw.lab.spec.topology import Topology, parse_topology  # after sys.path
from magw.util.logsetup import configure_logging  # after sys.path

TARGET_WINDOW_MS = 300.0
VICTIM = "east-gw1"


def topology(strategy: str, gateways: int, *, multi_active: bool = True) -> Topology:
    spec = {"gateways": gateways, "workers": 1, "pods_per_node": 1}
    return parse_topology({"strategy": strategy, "multi_active": multi_active,
                           "clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})  # fmt: skip


def wait_all_up(lab: LabLayout, st: LabState, limit: float = 60.0) -> None:
    """Until every route agent's status says no peer is down (bounded)."""
    deadline = time.monotonic() + limit
    while True:
        downs = {n.name: ((agent_status(st, n) or {}).get("health") or {}).get("down") for n in lab.nodes}
        if all(d == [] for d in downs.values()):
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"gateways not all up after {limit:g} s: {downs}")
        time.sleep(0.2)


def row(label: str, result: FailoverResult, gateways: int) -> str:
    s = result.summary()
    crossed = s["crossed_victim"] / s["flows"] if s["flows"] else 0.0
    moved_per_crossed = f"{s['share_moved'] / crossed:>8.2f}" if crossed else f"{'-':>8}"
    return (
        f"{label:<24} {s['flows']:>5} {s['window_p50_ms']:>7.1f} {s['window_max_ms']:>7.1f} "
        f"{s['window_p50_ms'] / TARGET_WINDOW_MS:>7.2f} {s['share_with_loss']:>6.0%} {crossed:>8.0%} "
        f"{s['share_moved']:>6.0%} {moved_per_crossed} {s['share_moved_forward']:>6.0%} "
        f"{s['share_moved_forward'] * gateways:>7.2f} {s['lost_on_untouched']:>9} {s['sent_share']:>5.0%}"
    )


HEADER = (
    f"{'run':<24} {'flows':>5} {'p50 ms':>7} {'max ms':>7} {'p50/300':>7} {'lossy':>6} {'crossed':>8} "
    f"{'moved':>6} {'mv/cross':>8} {'fwd mv':>6} {'fwd x N':>7} {'untouched':>9} {'sent':>5}"
)


def with_lab(topo: Topology, fn: Callable[[LabLayout, LabState], None]) -> None:
    name = f"b{uuid.uuid4().hex[:7]}"
    try:
        st = build.up(topo, name=name, wait_timeout=120.0)
        lab = layout(name, topo)
        wait_all_up(lab, st)
        fn(lab, st)
    finally:
        build.down(name)


def run_strategy(strategy: str, args: argparse.Namespace, results: dict[str, object]) -> None:
    def measure(lab: LabLayout, st: LabState) -> None:
        client = lab.cluster("east").pods_of("east-w1")[0]
        server = lab.cluster("west").pods_of("west-w1")[0]
        kw = {"client": client, "server": server, "flows": args.flows, "rate": args.rate,
              "duration": args.duration, "senders": args.senders}  # fmt: skip
        failed = measure_failover(lab, st, victim=VICTIM, fail_at=args.fail_at, **kw)
        print(row(f"{strategy} fail 1/{args.gateways}", failed, args.gateways), flush=True)
        results[f"{strategy}_fail"] = failed.summary()
        time.sleep(args.settle)
        recovered = measure_recovery(lab, st, victim=VICTIM, recover_at=args.fail_at, **kw)
        print(row(f"{strategy} recover", recovered, args.gateways), flush=True)
        results[f"{strategy}_recover"] = recovered.summary()

    with_lab(topology(strategy, args.gateways), measure)


def run_single(args: argparse.Namespace, results: dict[str, object]) -> None:
    def measure(lab: LabLayout, st: LabState) -> None:
        client = lab.cluster("east").pods_of("east-w1")[0]
        server = lab.cluster("west").pods_of("west-w1")[0]
        kw = {"client": client, "server": server, "flows": args.flows, "rate": args.rate,
              "duration": args.duration, "senders": args.senders}  # fmt: skip
        failed = measure_failover(lab, st, victim=VICTIM, fail_at=args.fail_at, **kw)
        print(row("single-gateway takeover", failed, 1), flush=True)
        results["single_takeover"] = failed.summary()
        failure.recover(st.name, VICTIM)

    with_lab(topology("resilient", 2, multi_active=False), measure)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=64, help="UDP flows (default 64)")
    p.add_argument("--rate", type=int, default=100, help="datagrams per second per flow (default 100)")
    p.add_argument("--gateways", type=int, default=4, help="gateways per cluster (default 4)")
    p.add_argument("--strategies", default="resilient,multipath", help="comma-separated (default resilient,multipath)")
    p.add_argument("--duration", type=float, default=6.0, help="seconds of traffic per measurement (default 6)")
    p.add_argument("--fail-at", type=float, default=2.0, help="seconds into the traffic of the failure (default 2)")
    p.add_argument("--senders", type=int, default=2, help="sender processes sharing the flows (default 2)")
    p.add_argument("--settle", type=float, default=1.0, help="seconds between failure and recovery runs")
    p.add_argument("--single", action="store_true", help="also measure a single-gateway mode takeover")
    p.add_argument("--json", metavar="FILE", help="also write the summaries as JSON")
    args = p.parse_args()
    if os.geteuid() != 0:
        p.error("needs root (network namespaces)")
    configure_logging("console", "warning")
    structlog.get_logger(__name__)
    print(f"{args.flows} flows x {args.rate} pkt/s, {args.gateways} gateways per cluster, victim {VICTIM}; "
          "(columns: see the module docstring)", flush=True)  # fmt: skip
    print(HEADER, flush=True)
    results: dict[str, object] = {}
    for strategy in args.strategies.split(","):
        run_strategy(strategy.strip(), args, results)
    if args.single:
        run_single(args, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
