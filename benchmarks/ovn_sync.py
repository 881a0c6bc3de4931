"""The OVN syncer against ``ovn-nbctl``, side by side in one run, each on a fresh real NB database.

    .venv/bin/python benchmarks/ovn_sync.py [--cidrs 1000] [--gateways 3] [--repeat 3]

1. Initial sync of ``--cidrs`` remote CIDRs (spread over 50 remote clusters), ``--gateways`` gateways:
   - ours: ``sync_ovn`` through the ovsdbapp driver, in process (connect, observe, plan, diff, one
     transaction, until the NB server has committed it);
   - baseline: one ``ovn-nbctl`` process creating the same rows in one batch (``magw.desired.ovn.nbctl``:
     the same commands ``magw ovn plan --nbctl`` prints), on an NB holding the same OVN-K topology.
   Both are timed from start to the NB's reply; the ratio is ours / ovn-nbctl (median of ``--repeat``).
2. The NB change of one gateway failover (one gateway taken down by the health view): operations in the
   change set, and the sync's milliseconds.
3. For information: how long ovn-northd takes to compile the initial NB into the SB
   (``ovn-nbctl --wait=sb sync`` right after each commit).

No assertion: the figures go to docs/performance.md (rows "OVN").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from magw.desired.ovn.nbctl import batch_argv, state_commands
from magw.desired.ovn.planner import OvnInputs, plan_ovn
from magw.drivers.ovn import connect
from magw.model import Cluster, Config, Endpoint, Health, Node, Snapshot
from magw.reconcile.ovnsync import sync_ovn
from tests.support.ovn_fixture import build_ovnk, nbctl, ovn_databases, ovn_missing

REMOTE_CLUSTERS = 50


def snapshot(cidrs: int, gateways: int, down: tuple[str, ...] = ()) -> Snapshot:
    per = max(1, cidrs // REMOTE_CLUSTERS)
    clusters = [
        Cluster(id="east", pod_cidrs=(IPv4Network("10.128.0.0/14"),), service_cidrs=(IPv4Network("10.96.0.0/16"),))
    ]
    nets = iter(IPv4Network("20.0.0.0/8").subnets(new_prefix=24))
    for c in range(REMOTE_CLUSTERS):
        mine = [next(nets) for _ in range(per)]
        clusters.append(Cluster(id=f"r{c:03d}", pod_cidrs=tuple(mine[:-1] or mine), service_cidrs=tuple(mine[-1:])))
    gws = [f"gw{i}" for i in range(1, gateways + 1)]
    nodes = [Node(name=g, ip=IPv4Address(f"172.18.0.{i + 2}"), cni_ip=IPv4Address(f"10.128.{i}.2"), gateway=True)
             for i, g in enumerate(gws)]  # fmt: skip
    endpoints = [Endpoint(cluster="east", hostname=n.name, private_ip=n.ip) for n in nodes]
    endpoints += [Endpoint(cluster=f"r{c:03d}", hostname=f"r{c:03d}-gw", private_ip=IPv4Address(f"172.20.{c}.2"))
                  for c in range(REMOTE_CLUSTERS)]  # fmt: skip
    return Snapshot(local_cluster="east", clusters=clusters, nodes=nodes, endpoints=endpoints,
                    config=Config(multi_active=True), health=Health(down=frozenset(down)))  # fmt: skip


def _wait_sb(dbs) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    nbctl(dbs, "--wait=sb", "sync")
    return time.perf_counter() - start


def run_ours(workdir: Path, snap: Snapshot, gateways: int) -> dict[str, float]:
    with ovn_databases(workdir) as dbs:
        build_ovnk(dbs, nodes=[f"gw{i}" for i in range(1, gateways + 1)])
        _wait_sb(dbs)
        start = time.perf_counter()
        with closing(connect(dbs.nb, dbs.sb)) as driver:
            result = sync_ovn(driver, snap)
            took = time.perf_counter() - start
            assert result.ok, result.error
            rows = len(result.changes) if result.changes is not None else 0
            northd = _wait_sb(dbs)
            down = snapshot(len(_cidrs(snap)), gateways, down=("gw2",))
            # The syncer's failover: from the rows the initial sync left (no read of the NB or the SB).
            failover = sync_ovn(driver, down, known=result.known, chassis=result.chassis)
            assert failover.ok, failover.error
            assert failover.changes is not None and not failover.observed
            ops = len(failover.changes)
            kinds = sorted({type(u.new).__name__ for u in failover.changes.updates})
            # The same change as a full sync would make it (the periodic resync's way): gw2 back, then down.
            assert sync_ovn(driver, snap).ok
            full = sync_ovn(driver, down)
            assert full.ok and full.observed and full.changes is not None and len(full.changes) == ops
    return {"seconds": took, "rows": rows, "northd": northd, "failover_ops": ops, "failover_ms": failover.took_ms,
            "failover_full_ms": full.took_ms, "failover_kinds": ",".join(kinds)}  # type: ignore[dict-item]  # fmt: skip


def _cidrs(snap: Snapshot) -> list[IPv4Network]:
    return [n for c in snap.remote_clusters for n in c.cidrs]


def run_nbctl(workdir: Path, snap: Snapshot, gateways: int) -> dict[str, float]:
    with ovn_databases(workdir) as dbs:
        topo = build_ovnk(dbs, nodes=[f"gw{i}" for i in range(1, gateways + 1)])
        _wait_sb(dbs)
        plan = plan_ovn(snap, OvnInputs(chassis=topo.chassis))
        group = nbctl(dbs, "--bare", "--columns=_uuid", "find", "Load_Balancer_Group", "name=clusterLBGroup").strip()
        argv = batch_argv(state_commands(plan.state, {"clusterLBGroup": group}))
        start = time.perf_counter()
        subprocess.run(["ovn-nbctl", f"--db={dbs.nb}", "--timeout=300", *argv], check=True, capture_output=True,
                       env={**os.environ, "OVS_RUNDIR": str(dbs.dir)})  # fmt: skip
        took = time.perf_counter() - start
        return {"seconds": took, "rows": plan.state.count(), "northd": _wait_sb(dbs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cidrs", type=int, default=1000)
    ap.add_argument("--gateways", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    reason = ovn_missing()
    if reason:
        print(f"ovn_sync: {reason}", file=sys.stderr)
        return 2
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    snap = snapshot(args.cidrs, args.gateways)
    print(f"{len(_cidrs(snap))} remote CIDRs in {REMOTE_CLUSTERS} clusters, {args.gateways} gateways")
    ours, base = [], []
    with tempfile.TemporaryDirectory(prefix="magw-ovnbench-") as tmp:
        for i in range(args.repeat):  # interleaved, so both see the same load
            ours.append(run_ours(Path(tmp) / f"ours{i}", snap, args.gateways))
            base.append(run_nbctl(Path(tmp) / f"nbctl{i}", snap, args.gateways))
    o = statistics.median(r["seconds"] for r in ours)
    b = statistics.median(r["seconds"] for r in base)
    print(f"initial sync: ours {o * 1000:.0f} ms ({int(ours[0]['rows'])} rows, one transaction), "
          f"ovn-nbctl batch {b * 1000:.0f} ms ({int(base[0]['rows'])} rows): ratio {o / b:.2f}x")  # fmt: skip
    print(f"  every run: ours {[round(r['seconds'] * 1000) for r in ours]} ms, "
          f"ovn-nbctl {[round(r['seconds'] * 1000) for r in base]} ms")  # fmt: skip
    print(f"failover of gw2: {int(ours[0]['failover_ops'])} NB operations ({ours[0]['failover_kinds']} updates), "
          f"one transaction; median {statistics.median(r['failover_ms'] for r in ours):.1f} ms from the known rows "
          f"(the syncer's way), {statistics.median(r['failover_full_ms'] for r in ours):.1f} ms as a full sync "
          "(reading our rows back)")  # fmt: skip
    print(f"ovn-northd to SB after the initial commit (info): median "
          f"{statistics.median(r['northd'] for r in ours + base) * 1000:.0f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
