"""Benchmark: what following the broker directory costs an idle daemon, with inotify and with 30 ms polling.

Usage: ``.venv/bin/python benchmarks/broker_idle.py [--gateways 12] [--documents 60] [--seconds 30] [--changes 20]``

The directory holds ``--documents`` documents like the soak lab's (Cluster, Config, Node files) and
``--gateways`` Endpoint files that another process touches once a second each, spread over the second, as each
gateway daemon's heartbeat does. Two child processes follow it side by side for ``--seconds``, in the same run
and under the same load: one ``FileBroker`` watching with inotify (the default), one polling every 30 ms
(``use_inotify=False``, the behaviour before). Each child reports its own CPU time (user + system, from
``getrusage``) and the passes it made over those seconds, with nothing but the heartbeats going on. Then the
parent writes ``--changes`` new Node documents, 0.5 s apart, with the heartbeats still going: the time from each
rename to the listener hearing of it is the *change latency* (it includes the pass that assembles the new
snapshot).

Printed: per mode, CPU ms per second of wall time, passes per second, change latency p50 and max; the CPU
ratio; the load average. Nothing here needs root or a namespace: the directory is a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from magw.sources.file.atomic import write_atomic  # after sys.path
from magw.sources.file.broker import FileBroker  # after sys.path

MAX_GATEWAYS, MAX_DOCUMENTS, MAX_SECONDS = 500, 5_000, 3_600
CHANGE_EVERY = 0.5  # seconds between the parent's new Node documents
WARM_UP = 1.0  # seconds: each child's first pass and snapshot, not measured
CLUSTER = "kind: Cluster\nid: east\npod_cidrs: [10.1.0.0/16]\nservice_cidrs: [100.1.0.0/16]\n"


def populate(directory: Path, gateways: int, documents: int) -> list[Path]:
    write_atomic(directory / "cluster-east.yaml", CLUSTER)
    write_atomic(directory / "config.yaml", "kind: Config\nstrategy: group\n")
    for i in range(documents):
        write_atomic(directory / f"node-n{i}.yaml", node_doc(f"n{i}", i, gateway=i < gateways))
    endpoints = []
    for i in range(gateways):
        path = directory / f"endpoint-east@n{i}.yaml"
        address = f"172.18.{i // 250}.{i % 250 + 2}"
        write_atomic(path, f"kind: Endpoint\ncluster: east\nhostname: n{i}\nprivate_ip: {address}\n")
        endpoints.append(path)
    return endpoints


def node_doc(name: str, i: int, *, gateway: bool = False) -> str:
    return (f"kind: Node\ncluster: east\nname: {name}\nip: 172.18.{i // 250}.{i % 250 + 2}\n"
            f"cni_ip: 10.1.{i % 250}.1\ngateway: {'true' if gateway else 'false'}\n")  # fmt: skip


def child(mode: str, directory: str, seconds: float, changes: int) -> None:
    """One broker following ``directory``: CPU over ``seconds``, then the change phase; prints a JSON report."""
    heard: dict[str, float] = {}
    broker = FileBroker(directory, local_cluster="east", use_inotify=mode == "inotify", endpoint_ttl=5.0)
    passes = 0
    listing = broker._listing

    def counted() -> dict[str, tuple[int, int, int]] | None:
        nonlocal passes
        passes += 1
        return listing()

    broker._listing = counted  # type: ignore[method-assign]

    def listener(snapshot: object) -> None:
        now = time.time()
        for node in getattr(snapshot, "nodes", ()):
            heard.setdefault(node.name, now)

    async def main() -> None:
        broker.subscribe(listener)
        task = asyncio.create_task(broker.run())
        await asyncio.sleep(WARM_UP)
        before, passes_before = resource.getrusage(resource.RUSAGE_SELF), passes
        await asyncio.sleep(seconds)
        after, passes_after = resource.getrusage(resource.RUSAGE_SELF), passes
        await asyncio.sleep(changes * CHANGE_EVERY + 1.0)  # the change phase
        broker.stop()
        await asyncio.wait_for(task, 30)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(json.dumps({"cpu_s": cpu, "passes": passes_after - passes_before, "heard": heard}))

    asyncio.run(main())


def run(gateways: int, documents: int, seconds: float, changes: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="magw-broker-idle-") as tmp:
        directory = Path(tmp)
        endpoints = populate(directory, gateways, documents)
        argv = [sys.executable, __file__, "--child"]
        children = {
            mode: subprocess.Popen([*argv, mode, tmp, str(seconds), str(changes)], stdout=subprocess.PIPE, text=True)
            for mode in ("inotify", "polling")
        }
        written: dict[str, float] = {}
        try:
            start = time.monotonic()
            next_change = start + WARM_UP + seconds + 0.3  # the children measure CPU before that
            end = next_change + changes * CHANGE_EVERY
            tick, k = 0, 0
            while time.monotonic() < end:  # bounded by --seconds and --changes
                slot = start + tick / gateways
                time.sleep(max(0.0, slot - time.monotonic()))
                os.utime(endpoints[tick % gateways])  # the heartbeats, spread over each second
                tick += 1
                if time.monotonic() >= next_change and k < changes:
                    name = f"bench-{k}"
                    write_atomic(directory / f"node-{name}.yaml", node_doc(name, documents + k))
                    written[name] = time.time()
                    k, next_change = k + 1, next_change + CHANGE_EVERY
            # the last line: the broker logs to stdout before it
            reports = {mode: json.loads(p.communicate(timeout=60)[0].splitlines()[-1]) for mode, p in children.items()}
        finally:
            for p in children.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
    out: dict[str, dict[str, float]] = {}
    for mode, report in reports.items():
        latencies = [(report["heard"][name] - at) * 1e3 for name, at in written.items() if name in report["heard"]]
        out[mode] = {
            "cpu_ms_per_s": report["cpu_s"] * 1e3 / seconds,
            "passes_per_s": report["passes"] / seconds,
            "changes": len(written),
            "changes_seen": len(latencies),
            "latency_p50_ms": statistics.median(latencies) if latencies else float("nan"),
            "latency_max_ms": max(latencies) if latencies else float("nan"),
        }
    return out


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gateways", type=int, default=12, help="Endpoint files touched once a second each")
    ap.add_argument("--documents", type=int, default=60, help="Node documents beside them")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long each broker is measured")
    ap.add_argument("--changes", type=int, default=20, help="new Node documents written after that, 0.5 s apart")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    if not 1 <= args.gateways <= MAX_GATEWAYS or not 0 <= args.documents <= MAX_DOCUMENTS:
        ap.error(f"--gateways must be 1..{MAX_GATEWAYS} and --documents 0..{MAX_DOCUMENTS}")
    if not 5 <= args.seconds <= MAX_SECONDS or not 1 <= args.changes <= 1000:
        ap.error(f"--seconds must be 5..{MAX_SECONDS} and --changes 1..1000")
    load = os.getloadavg()
    out = run(args.gateways, args.documents, args.seconds, args.changes)
    print(f"{args.gateways} Endpoint files touched 1/s each, {args.documents} other documents, {args.seconds:.0f} s; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    print(f"{'mode':<8} {'CPU ms/s':>9} {'passes/s':>9} {'changes seen':>13} {'latency p50':>12} {'max':>9}")
    for mode, f in out.items():
        print(f"{mode:<8} {f['cpu_ms_per_s']:>9.1f} {f['passes_per_s']:>9.1f} "
              f"{int(f['changes_seen']):>6}/{int(f['changes']):<6} {f['latency_p50_ms']:>9.1f} ms "
              f"{f['latency_max_ms']:>6.1f} ms")  # fmt: skip
    ratio = out["polling"]["cpu_ms_per_s"] / max(out["inotify"]["cpu_ms_per_s"], 1e-9)
    print(f"CPU: polling / inotify = {ratio:.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "load": load, "modes": out}, indent=2))


if __name__ == "__main__":
    main()
