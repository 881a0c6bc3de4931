"""Globalnet IPAM churn: create/delete cycles across every kind, with a controller restart every N cycles.

Each cycle creates one object (a namespace GlobalEgressIP, a pod-selector GlobalEgressIP, an exported ClusterIP
service, an exported headless service with a backend pod, or a gateway node) as a user would (a YAML file in
the broker directory, atomic rename), runs the real controller's passes (``GlobalnetController.reconcile``:
broker scan, plan, atomic status writes) until the object's status file exists, and deletes an older object
so the live set stays around ``--live``. Every ``--restart-every`` cycles the controller is replaced by a new
one (memory dropped, rebuilt from the broker). At the end, after a last pass, the status files are read as
plain YAML and checked:

- leaks: addresses held by a status whose object no longer exists (target 0);
- duplicates: addresses held by two statuses (target 0);

and it prints allocations per second (addresses handed out / time in controller passes) and the time from an
object's creation (its file renamed into place) to its status file in the broker, p50 and p99.

    .venv/bin/python benchmarks/ipam_churn.py [--cycles 10000] [--restart-every 500] [--live 200]

No root, no kernel: files in a temporary directory only.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from magw.controllers.globalnet.controller import GlobalnetController
from magw.sources.file.broker import FileBroker
from magw.sources.file.globalnet_store import GlobalnetStore
from magw.util.logsetup import configure_logging

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
KINDS = ("namespace-egress", "selector-egress", "clusterip-export", "headless-export", "gateway")
# A gateway joining rewrites the status of every per-gateway egress object (a block for it): rarer than the rest.
WEIGHTS = (10, 10, 10, 10, 1)


def put(d: Path, name: str, docs: list[dict[str, object]]) -> None:
    tmp = d / f".{name}.tmp"
    tmp.write_text(yaml.safe_dump_all([{"cluster": "east", **doc} for doc in docs]))
    tmp.rename(d / f"{name}.yaml")


def create(d: Path, kind: str, i: int) -> tuple[str, str]:
    """Write the object of cycle ``i``; returns (its file name, the status file that proves it was seen)."""
    name = f"o{i}"
    status = f"globalnet-status@east@GlobalEgressIP@ns{i % 7}@{name}.yaml"
    if kind == "namespace-egress":
        put(d, name, [{"kind": "GlobalEgressIP", "namespace": f"ns{i % 7}", "name": name, "numberOfIPs": 1 + i % 3}])
    elif kind == "selector-egress":
        sel = {"matchLabels": {"app": f"a{i % 5}"}}
        put(d, name, [{"kind": "GlobalEgressIP", "namespace": f"ns{i % 7}", "name": name, "podSelector": sel}])
    elif kind == "clusterip-export":
        ip = f"100.1.{(i >> 8) & 255}.{i & 255}"
        put(
            d,
            name,
            [
                {"kind": "Service", "namespace": f"ns{i % 7}", "name": name, "cluster_ip": ip},
                {"kind": "ServiceExport", "namespace": f"ns{i % 7}", "name": name},
            ],
        )
        status = f"globalnet-status@east@GlobalIngressIP@ns{i % 7}@svc-{name}.yaml"
    elif kind == "headless-export":
        ip = f"10.1.{(i >> 8) & 255}.{i & 255}"
        put(
            d,
            name,
            [
                {
                    "kind": "Service",
                    "namespace": f"ns{i % 7}",
                    "name": name,
                    "cluster_ip": "None",
                    "selector": {"svc": name},
                },
                {"kind": "ServiceExport", "namespace": f"ns{i % 7}", "name": name},
                {"kind": "Pod", "namespace": f"ns{i % 7}", "name": f"p{name}", "ip": ip, "labels": {"svc": name}},
            ],
        )
        status = f"globalnet-status@east@GlobalIngressIP@ns{i % 7}@pod-p{name}.yaml"
    else:
        node = f"gw{i}"
        put(
            d,
            name,
            [
                {
                    "kind": "Node",
                    "name": node,
                    "ip": f"172.18.{(i >> 8) & 255}.{i & 255}",
                    "cni_ip": f"10.9.{(i >> 8) & 255}.{i & 255}",
                    "gateway": True,
                }
            ],
        )
        status = f"globalnet-status@east@ClusterGlobalEgressIP@_@{node}-cluster-egress.submariner.io.yaml"
    return name, status


def live_refs(d: Path) -> set[tuple[str, str, str]]:
    refs: set[tuple[str, str, str]] = set()
    for path in d.glob("*.yaml"):
        for doc in yaml.load_all(path.read_text(), Loader=LOADER):
            if doc and doc.get("kind") in ("GlobalEgressIP", "ClusterGlobalEgressIP", "GlobalIngressIP"):
                refs.add((doc["kind"], doc.get("namespace", ""), doc["name"]))
    return refs


def audit(d: Path) -> tuple[int, int, int]:
    """(leaked addresses, duplicated addresses, held addresses), from the status files."""
    live = live_refs(d)
    holders: dict[str, list[tuple[str, str, str]]] = {}
    for path in d.glob("globalnet-status@*.yaml"):
        doc = yaml.load(path.read_text(), Loader=LOADER)
        obj = doc["object"]
        ref = (obj["kind"], obj.get("namespace", ""), obj["name"])
        for ip in doc.get("allocatedIPs") or ([doc["allocatedIP"]] if doc.get("allocatedIP") else []):
            holders.setdefault(ip, []).append(ref)
    leaks = sum(1 for refs in holders.values() if all(r not in live for r in refs))
    dups = sum(1 for refs in holders.values() if len(refs) > 1)
    return leaks, dups, len(holders)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=10000)
    p.add_argument("--restart-every", type=int, default=500)
    p.add_argument("--live", type=int, default=200, help="objects kept alive (older ones are deleted)")
    p.add_argument("--cidr", default="242.1.0.0/16")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    configure_logging("console", "error")
    rng = random.Random(args.seed)
    d = Path(tempfile.mkdtemp(prefix="magw-ipam-churn-"))
    try:
        (d / "clusters.yaml").write_text(
            yaml.safe_dump(
                {
                    "kind": "Cluster",
                    "id": "east",
                    "pod_cidrs": ["10.1.0.0/16"],
                    "service_cidrs": ["100.1.0.0/16"],
                    "global_cidrs": [args.cidr],
                }
            )
        )
        put(d, "gw-base", [{"kind": "Node", "name": "base", "ip": "172.17.0.2", "cni_ip": "10.8.0.1", "gateway": True}])

        def new_controller() -> GlobalnetController:
            return GlobalnetController(
                source=FileBroker(d, local_cluster="east"), store=GlobalnetStore(d, "east"), grace=timedelta(seconds=0)
            )

        ctl = new_controller()
        latencies: list[float] = []
        pass_time = 0.0
        allocated = 0
        writes = 0
        live: list[str] = []
        restarts = 0
        load = os.getloadavg()
        started = time.perf_counter()
        for i in range(args.cycles):
            if i and i % args.restart_every == 0:
                ctl = new_controller()
                restarts += 1
            kind = rng.choices(KINDS, weights=WEIGHTS)[0]
            name, status = create(d, kind, i)
            t0 = time.perf_counter()
            for _ in range(10):
                t = time.perf_counter()
                result = ctl.reconcile()
                pass_time += time.perf_counter() - t
                writes += result.written + result.deleted
                allocated += result.allocated
                if (d / status).exists():
                    break
            else:
                print(f"cycle {i}: no status for {kind} {name} after 10 passes", file=sys.stderr)
                return 1
            latencies.append(time.perf_counter() - t0)
            live.append(name)
            if len(live) > args.live:
                victim = live.pop(rng.randrange(len(live)))
                (d / f"{victim}.yaml").unlink()
        for _ in range(5):  # let the last deletes through
            if not (ctl.reconcile().written or ctl.reconcile().deleted):
                break
        total = time.perf_counter() - started
        leaks, dups, held = audit(d)
        lat = sorted(latencies)
        p50 = statistics.median(lat)
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        print(
            f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
            f"cycles {args.cycles}, restarts {restarts}"
        )
        print(f"leaks: {leaks} (target 0)")
        print(f"duplicates: {dups} (target 0)")
        print(f"addresses held at the end: {held}; live objects about {args.live}")
        print(
            f"allocations: {allocated} addresses in {pass_time:.1f} s of controller passes: "
            f"{allocated / pass_time:.0f} addresses/s ({writes} file writes and deletes, {writes / pass_time:.0f}/s)"
        )
        print(f"creation to status in the broker: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
        print(f"wall time {total:.1f} s")
        return 0 if leaks == 0 and dups == 0 else 1
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
