"""Globalnet at scale (docs/performance.md): rule count, 100k-element apply against ``nft -f``, and pod churn.

Three measurements on a Globalnet gateway (``examples/globalnet-snapshot.yaml``, node e-gw1) with N extra pods
in namespace ``shop``, which a namespace GlobalEgressIP selects (each pod one element of ``gn_egress``):

1. **rules**: the number of nft rules of the planned table with 10, 1,000 and 100,000 pods (target: constant),
   and the number of set and map elements.
2. **apply**: the planned table with ``--pods`` (100,000) pods applied by our ``NftDriver`` to a fresh
   namespace, against ``nft -f`` of the same table as text (``magw.desired.nft.text``) in another fresh
   namespace; best of ``--repeat``; ratio ours / nft (target <= 1.5).
3. **churn**: with that table in the kernel, ``--events`` (1,000) pod events, alternately a new pod and the
   removal of an existing one. For each: plan (with the daemon's memo: the incremental Globalnet planner),
   diff against what the kernel holds (the reconciler's known state), apply. Printed: the commands per
   transaction (target: a few, O(changed)), whether any transaction rewrote the table, and the event-to-kernel
   latency p50/p99 (from the new snapshot to the kernel; the source's assembly of the event is not included),
   split into plan, diff and apply; beside it, every ``--full-every``-th event planned from scratch (the
   baseline; both plans must be equal) and the ratio of the medians.

Run as root: ``.venv/bin/python benchmarks/globalnet_scale.py [--pods 100000] [--events 1000] [--full-every 20]``.
Every namespace is deleted in ``finally``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from ipaddress import IPv4Address
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from magw.desired.nft.text import table_text  # after sys.path
from magw.desired.node.memo import PlanMemo  # after sys.path
from magw.desired.node.planner import plan  # after sys.path
from magw.desired.state import DesiredState  # after sys.path
from magw.drivers.nft import NftDriver  # after sys.path
from magw.drivers.nft.driver import transaction  # after sys.path
from magw.model import Snapshot  # after sys.path
from magw.model.globalnet import Pod  # after sys.path
from magw.reconcile.changeset import NftChange  # after sys.path
from magw.reconcile.diff import nft_changes  # after sys.path
from magw.snapshot.load import load_snapshot  # after sys.path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "globalnet-snapshot.yaml"
NODE = "e-gw1"
FIRST_POD = int(IPv4Address("10.0.128.0"))
TIMEOUT = 600


@contextmanager
def namespace() -> Iterator[str]:
    name = f"magw-bench-gn-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=TIMEOUT)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=TIMEOUT)


def with_pods(base: Snapshot, ips: list[int]) -> Snapshot:
    pods = [Pod(namespace="shop", name=f"p{ip - FIRST_POD}", ip=IPv4Address(ip), node="e-w1") for ip in ips]
    gn = attrs.evolve(base.globalnet, pods=(*base.globalnet.pods, *pods))
    return attrs.evolve(base, globalnet=gn)


def rules_rows(base: Snapshot) -> None:
    for n in (10, 1_000, 100_000):
        table = plan(with_pods(base, list(range(FIRST_POD, FIRST_POD + n))), NODE).nft
        assert table is not None
        elements = sum(len(s.elements) for s in table.sets) + sum(len(m.elements) for m in table.maps)
        print(f"rules  pods={n:>7}  nft rules={len(table.rules):>3}  set+map elements={elements:>7}")


def apply_rows(base: Snapshot, pods: int, repeat: int) -> None:
    table = plan(with_pods(base, list(range(FIRST_POD, FIRST_POD + pods))), NODE).nft
    assert table is not None
    text = table_text(table)
    ours, theirs = [], []
    for _ in range(repeat):
        with namespace() as ns:
            start = time.perf_counter()
            subprocess.run(
                ["ip", "netns", "exec", ns, "nft", "-f", "-"], input=text, text=True, check=True, timeout=TIMEOUT
            )
            theirs.append(time.perf_counter() - start)
        with namespace() as ns, NftDriver(ns) as driver:
            start = time.perf_counter()
            result = driver.apply([NftChange(family=table.family, name=table.name, table=table)])
            ours.append(time.perf_counter() - start)
            assert result.ok, [f.describe() for f in result.failed]
    o, t = min(ours), min(theirs)
    print(f"apply  pods={pods:>7}  ours={o:.3f}s  nft -f={t:.3f}s  ratio={o / t:.2f}x  (best of {repeat})")


def _pod(ip: int) -> Pod:
    return Pod(namespace="shop", name=f"p{ip - FIRST_POD}", ip=IPv4Address(ip), node="e-w1")


def _snapshot_of(base: Snapshot, pods: list[Pod]) -> Snapshot:
    return attrs.evolve(base, globalnet=attrs.evolve(base.globalnet, pods=(*base.globalnet.pods, *pods)))


def churn_rows(base: Snapshot, pods: int, events: int, full_every: int) -> None:
    """Pod events through the daemon's path: ``plan`` with its memo (the incremental Globalnet planner), the diff
    against what the kernel holds, the apply. Unchanged pods stay the very objects (as a source that maps only
    what changed hands them over). Every ``full_every``-th event the same snapshot is also planned from scratch
    (no memo), timed as the baseline, and both plans must be equal."""
    live = [_pod(ip) for ip in range(FIRST_POD, FIRST_POD + pods)]
    next_ip = FIRST_POD + pods
    memo = PlanMemo()
    snapshot = _snapshot_of(base, live)
    start = time.perf_counter()
    known = plan(snapshot, NODE, memo=memo)
    first = time.perf_counter() - start
    plan_s, full_s, diff_s, apply_s, total_s, sizes = [], [], [], [], [], []
    rewrites = 0
    with namespace() as ns, NftDriver(ns) as driver:
        assert known.nft is not None
        driver.apply([NftChange(family="ip", name="magw", table=known.nft)])
        for i in range(events):
            if i % 2 == 0:
                live.append(_pod(next_ip))
                next_ip += 1
            else:
                live.pop(i % len(live))
            snapshot = _snapshot_of(base, live)  # what the source would hand over (its assembly is not timed here)
            t0 = time.perf_counter()
            want: DesiredState = plan(snapshot, NODE, memo=memo)
            t1 = time.perf_counter()
            changes = nft_changes(want.nft, known.nft)
            t2 = time.perf_counter()
            result = driver.apply(list(changes))
            t3 = time.perf_counter()
            assert result.ok, [f.describe() for f in result.failed]
            if i % full_every == 0:
                f0 = time.perf_counter()
                full = plan(snapshot, NODE)
                full_s.append(time.perf_counter() - f0)
                assert full.nft == want.nft, f"event {i}: the incremental plan differs from the full one"
            commands = [c for ch in changes for c in transaction(ch)["nftables"]]  # type: ignore[union-attr]
            sizes.append(len(commands))
            rewrites += any("table" in next(iter(c.values())) for c in commands)
            plan_s.append(t1 - t0)
            diff_s.append(t2 - t1)
            apply_s.append(t3 - t2)
            total_s.append(t3 - t0)
            known = want
        final = driver.observe()
    assert final == known.nft, "after the churn the kernel's table differs from the plan"
    print(
        f"churn  pods={pods:>7}  events={events}  commands/transaction: max={max(sizes)} "
        f"median={statistics.median(sizes):g}  table rewrites={rewrites}  first plan {first * 1000:.0f} ms"
    )
    rows = (("plan", plan_s), ("diff", diff_s), ("apply", apply_s), ("event->kernel", total_s))
    for name, values in (*rows, (f"full plan (1 in {full_every})", full_s)):
        q = statistics.quantiles(values, n=100) if len(values) > 1 else [values[0]] * 99
        print(f"churn  {name:<22} p50={q[49] * 1000:8.1f} ms  p99={q[98] * 1000:8.1f} ms  ({len(values)} events)")
    ratio = statistics.median(full_s) / statistics.median(plan_s)
    print(f"churn  incremental plan vs full plan: {ratio:.0f}x faster (medians)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=100_000)
    p.add_argument("--events", type=int, default=1_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--full-every", type=int, default=20, help="plan every Nth churn event from scratch too")
    p.add_argument("--skip", default="", help="comma list of parts to skip: rules, apply, churn")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("globalnet_scale: run as root (network namespaces)", file=sys.stderr)
        return 2
    skip = set(filter(None, args.skip.split(",")))
    base = load_snapshot(EXAMPLE)
    print(json.dumps({"load": os.getloadavg()}))
    if "rules" not in skip:
        rules_rows(base)
    if "apply" not in skip:
        apply_rows(base, args.pods, args.repeat)
    if "churn" not in skip:
        churn_rows(base, args.pods, args.events, args.full_every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
