"""Benchmark: a gateway of a large local cluster (N nodes: N neighbors and N FDB entries on vx-submariner).

Run as root: ``.venv/bin/python benchmarks/node_scale.py [--nodes 5000] [--repeat 3]``.

The snapshot: local cluster ``c0`` with N nodes (``n0`` is the gateway ``gw``), two remote clusters
with one CIDR each. Every tool works in its own fresh namespace prepared like a node (``lo`` up, a
veth ``cni0`` holding the gateway's CNI IP), deleted in ``finally``.

* **initial sync**: the plan's ``observe``/``diff``/``apply`` through the node driver (the path
  ``magw apply`` takes, in process: ``magw.cli.sync.sync``), against ``ip -batch`` plus
  ``bridge -batch`` (plus ``nft -f``) creating the same state, translated from the plan's text by
  ``end_to_end.batches``.
* **join / leave**: under the synced state, one node more (or ``n1`` less), taken the way the running
  route agent takes it: the planner's memo and the known state kept from the last sync (no observe).
  Printed: the ChangeSet's ops by kind, and independently the messages ``ip -o monitor`` saw in the
  namespace while the change was applied; the time from the new snapshot (parsed) to the kernel holding
  it (plan + diff + apply), split into its parts. Last, one full resync of the same state (observe, no
  memo), which the agent runs every ``--resync-period``.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from ipaddress import IPv4Address
from typing import Any

import attrs
import structlog

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from end_to_end import _run_file, batches, namespace, time_iproute2  # after sys.path

from magw.cli.nodeargs import open_node_driver  # after sys.path
from magw.cli.sync import sync  # after sys.path
from magw.desired.node.memo import PlanMemo  # after sys.path
from magw.desired.node.planner import plan  # after sys.path
from magw.desired.render import render_text  # after sys.path
from magw.desired.state import DesiredState  # after sys.path
from magw.reconcile.diff import diff  # after sys.path
from magw.reconcile.known import after_apply  # after sys.path
from magw.snapshot.load import parse_snapshot_text  # after sys.path

NODE = "n0"
FIRST_NODE_IP = int(IPv4Address("172.16.0.2"))
MAX_NODES = 60_000


def node_line(i: int) -> str:
    ip = IPv4Address(FIRST_NODE_IP + i)
    cni = IPv4Address(int(IPv4Address("10.0.0.1")) + (i << 8))  # 10.x.y.1: one /24 per node
    gateway = ", gateway: true" if i == 0 else ""
    return f"- {{name: n{i}, ip: {ip}, cni_ip: {cni}{gateway}}}\n"


def snapshot_text(nodes: range) -> str:
    """N local nodes (``nodes`` are their indices; 0 is the gateway), two small remote clusters."""
    return "".join(
        [
            "local_cluster: c0\nclusters:\n",
            "- id: c0\n  pod_cidrs: [10.0.0.0/8]\n  service_cidrs: [100.64.0.0/16]\n",
            "- id: c1\n  pod_cidrs: [11.1.0.0/16]\n  service_cidrs: [11.2.0.0/16]\n",
            "- id: c2\n  pod_cidrs: [12.1.0.0/16]\n  service_cidrs: [12.2.0.0/16]\n",
            "nodes:\n",
            *(node_line(i) for i in nodes),
            "endpoints:\n",
            "- {cluster: c0, hostname: n0, private_ip: 172.16.0.2}\n",
            "- {cluster: c1, hostname: c1-gw, private_ip: 172.31.1.2}\n",
            "- {cluster: c2, hostname: c2-gw, private_ip: 172.31.2.2}\n",
        ]
    )


class Monitor:
    """``ip -o monitor`` in the namespace: one line per rtnetlink message (links, addresses, neighbors/FDB, ...)."""

    def __init__(self, ns: str) -> None:
        self.proc = subprocess.Popen(
            ["ip", "-o", "-n", ns, "monitor", "link", "address", "neigh", "route", "nexthop", "rule"],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.3)  # let it subscribe before the change

    def stop(self) -> list[str]:
        time.sleep(0.3)  # let the last notifications arrive
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        return [line for line in out.splitlines() if line.strip()]


@attrs.define
class Agent:
    """What a running route agent keeps between syncs: the planner's memo and the known state (the last
    observed state with every applied change carried out, magw.reconcile.known), and the same steps it takes:
    one full sync (observe) first, then each change diffed against the known state."""

    ns: str
    memo: PlanMemo = attrs.field(factory=PlanMemo)
    known: DesiredState | None = None


def timed_change(agent: Agent, text: str, what: str) -> dict[str, Any]:
    """Bring the namespace to the plan of ``text``: split times, ops by kind, monitor lines.

    The first change of an agent observes the kernel (a full sync); later ones start from the known state,
    as the route agent's partial syncs do (a full resync still observes every ``--resync-period``).
    """
    snapshot = parse_snapshot_text(text)
    with open_node_driver(agent.ns) as driver:
        monitor = Monitor(agent.ns)
        try:
            t0 = time.perf_counter()
            desired = plan(snapshot, NODE, memo=agent.memo)
            t1 = time.perf_counter()
            observed = driver.observe() if agent.known is None else agent.known
            t2 = time.perf_counter()
            changes = diff(desired, observed)
            t3 = time.perf_counter()
            result = driver.apply(changes)
            t4 = time.perf_counter()
            agent.known = after_apply(observed, desired, result.applied, [f.op for f in result.failed])
        finally:
            lines = monitor.stop()
    if result.failed:
        raise SystemExit(f"{what}: {result.failed[0].describe()}")
    kinds = collections.Counter(op.kind for op in changes.ops)
    nft = len(changes.nft)
    return {
        "what": what,
        "plan": t1 - t0,
        "observe": t2 - t1,
        "diff": t3 - t2,
        "apply": t4 - t3,
        "total": t4 - t0,
        "ops": dict(sorted(kinds.items())),
        "nft": nft,
        "monitor": lines,
    }


def full_resync(agent: Agent, text: str) -> dict[str, Any]:
    """The same state again through a full sync (observe, no memo): what a periodic resync costs."""
    return timed_change(Agent(ns=agent.ns), text, "resync")


def initial(nodes: int) -> tuple[float, float, float]:
    """Seconds: ours (observe+diff+apply), ip+bridge batches, ip+bridge+nft batches."""
    text = snapshot_text(range(nodes))
    desired = plan(parse_snapshot_text(text), NODE)
    b = batches(render_text(desired))
    with namespace() as ns:  # ip -batch (links, addresses, neighbors, routes) + bridge -batch (FDB)
        ip_s = _run_file(["ip", "-n", ns, "-batch"], b.ip)
        ip_s += _run_file(["ip", "netns", "exec", ns, "bridge", "-batch"], b.bridge)
    all_s = time_iproute2(b, everything=True)
    with namespace() as ns, open_node_driver(ns) as driver, open(os.devnull, "w") as devnull:
        started = time.perf_counter()
        report = sync(driver, desired, dry_run=False, out=devnull)
        ours = time.perf_counter() - started
    if report.result.failed:
        raise SystemExit(f"initial sync: {report.result.failed[0].describe()}")
    return ours, ip_s, all_s


def print_change(r: dict[str, Any]) -> None:
    ms = {k: f"{r[k] * 1000:.1f}" for k in ("plan", "observe", "diff", "apply", "total")}
    print(
        f"{r['what']:<6} total {ms['total']} ms (plan {ms['plan']}, observe {ms['observe']}, diff {ms['diff']}, "
        f"apply {ms['apply']}); ops {r['ops']} nft {r['nft']}; monitor saw {len(r['monitor'])} messages",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000, help="nodes of the local cluster (default 5000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (default 3)")
    parser.add_argument("--show-messages", action="store_true", help="print the monitor lines of each change")
    args = parser.parse_args(argv)
    if not 2 <= args.nodes <= MAX_NODES:
        parser.error(f"--nodes: must be 2..{MAX_NODES}, got {args.nodes}")
    if not 1 <= args.repeat <= 20:
        parser.error(f"--repeat: must be 1..20, got {args.repeat}")
    if os.geteuid() != 0:
        print("needs root (creates network namespaces)", file=sys.stderr)
        return 2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    print(f"nodes {args.nodes}; nproc {os.cpu_count()}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    runs = [initial(args.nodes) for _ in range(args.repeat)]
    ours, ip_s, all_s = (min(r[i] for r in runs) for i in range(3))
    print(
        f"initial sync (best of {args.repeat}): ours {ours:.3f} s; ip+bridge -batch {ip_s:.3f} s "
        f"(ratio {ours / ip_s:.2f}); ip+bridge+nft {all_s:.3f} s (ratio {ours / all_s:.2f})",
        flush=True,
    )
    n = args.nodes
    with namespace() as ns:
        agent = Agent(ns=ns)
        timed_change(agent, snapshot_text(range(n)), "sync")
        for _ in range(args.repeat):
            for what, nodes in (("join", range(n + 1)), ("leave", range(n)), ("leave1", [0, *range(2, n)])):
                r = timed_change(agent, snapshot_text(nodes), what)
                print_change(r)
                if args.show_messages:
                    print("\n".join(f"    {line}" for line in r["monitor"]))
            timed_change(agent, snapshot_text(range(n)), "back")  # n1 again (not printed)
        print_change(full_resync(agent, snapshot_text(range(n))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
