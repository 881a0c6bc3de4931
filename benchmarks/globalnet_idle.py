"""Benchmark: what the Globalnet controller (``magw-globalnet``, file broker) costs while nothing changes, and how
soon it serves a new GlobalEgressIP, this tree's against another tree's, side by side in one run.

Usage: ``.venv/bin/python benchmarks/globalnet_idle.py --baseline TREE [--objects 20] [--gateways 4]
[--seconds 30] [--changes 10]``

``TREE`` is a checkout of the code to compare with (``git worktree add /tmp/magw-old <commit>``); without
``--baseline`` only this tree's controller runs. Each controller gets a broker directory of its own, with the
same documents: two clusters with global CIDRs, ``--gateways`` gateway Nodes and their Endpoint files (which the
benchmark touches once a second each, as the gateway daemons' heartbeats do), and ``--objects`` GlobalEgressIPs.
Both run as real ``magw-globalnet`` processes (``python -m magw.daemons.globalnet.main`` with that tree on
``PYTHONPATH``), with their default flags. Once both have written a status for every object (and 2 s more),
each process's CPU time (user + system, from ``/proc/PID/stat``) is read over ``--seconds``. Then the benchmark
writes ``--changes`` new GlobalEgressIPs, one at a time into both directories (which one first alternates), and
times each until its status file is there.

Printed: per tree, CPU ms per second of wall time, change latency p50 and max; the CPU ratio; the load average.
Nothing here needs root or a namespace: the directories are temporary directories.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_OBJECTS, MAX_GATEWAYS, MAX_SECONDS, MAX_CHANGES = 2_000, 100, 3_600, 200
SETTLE = 2.0  # seconds after convergence before measuring: the passes that read the controller's own writes
CHANGE_TIMEOUT = 15.0  # seconds a new object may take to get its status (past --resync, 10 s by default)
TICK = os.sysconf("SC_CLK_TCK")

CLUSTERS = """\
kind: Cluster
id: east
pod_cidrs: [10.1.0.0/16]
service_cidrs: [100.1.0.0/16]
global_cidrs: [242.1.0.0/16]
---
kind: Cluster
id: west
pod_cidrs: [10.2.0.0/16]
service_cidrs: [100.2.0.0/16]
global_cidrs: [242.2.0.0/16]
"""


def write(path: Path, text: str) -> None:
    """As users must write: a temp dot-file, then a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.rename(path)


def egress_ip(directory: Path, name: str) -> None:
    write(directory / f"user-{name}.yaml", f"kind: GlobalEgressIP\ncluster: east\nnamespace: ns\nname: {name}\n")


def status_path(directory: Path, name: str) -> Path:
    return directory / f"globalnet-status@east@GlobalEgressIP@ns@{name}.yaml"


def populate(directory: Path, gateways: int, objects: int) -> list[Path]:
    write(directory / "clusters.yaml", CLUSTERS)
    endpoints = []
    for i in range(gateways):
        ip, cni = f"172.18.0.{i + 2}", f"10.1.{i}.1"
        write(directory / f"node-gw{i}.yaml",
              f"kind: Node\ncluster: east\nname: gw{i}\nip: {ip}\ncni_ip: {cni}\ngateway: true\n")  # fmt: skip
        path = directory / f"endpoint-east@gw{i}.yaml"
        write(path, f"kind: Endpoint\ncluster: east\nhostname: gw{i}\nprivate_ip: {ip}\n")
        endpoints.append(path)
    for k in range(objects):
        egress_ip(directory, f"app{k}")
    return endpoints


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15 of stat(5)


def start(tree: Path, directory: Path, identity: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-m", "magw.daemons.globalnet.main", "--broker-dir", str(directory), "--cluster", "east",
            "--identity", identity, "--log-level", "warning"]  # fmt: skip
    return subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


Figures = dict[str, dict[str, float]]


def run(trees: dict[str, Path], gateways: int, objects: int, seconds: float, changes: int) -> Figures:
    with tempfile.TemporaryDirectory(prefix="magw-globalnet-idle-") as tmp:
        dirs = {label: Path(tmp) / label for label in trees}
        endpoints: list[Path] = []
        for directory in dirs.values():
            directory.mkdir()
            endpoints += populate(directory, gateways, objects)
        procs = {label: start(tree, dirs[label], f"bench-{label}") for label, tree in trees.items()}
        beat = {"at": time.monotonic(), "i": 0}

        def heartbeats() -> None:  # each Endpoint file touched once a second, spread over the second
            per_file = 1.0 / len(endpoints)
            while time.monotonic() >= beat["at"]:
                os.utime(endpoints[beat["i"] % len(endpoints)])
                beat["i"] += 1
                beat["at"] += per_file

        def wait(cond: object, timeout: float) -> bool:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:  # bounded
                if cond():  # type: ignore[operator]
                    return True
                heartbeats()
                time.sleep(0.002)
            return False

        try:
            for label, directory in dirs.items():
                names = [f"app{k}" for k in range(objects)]
                if not wait(lambda d=directory, n=names: all(status_path(d, x).exists() for x in n), 60.0):
                    raise SystemExit(f"{label}: no status for every object after 60 s")
            wait(lambda: False, SETTLE)
            before = {label: cpu_seconds(p.pid) for label, p in procs.items()}
            wait(lambda: False, seconds)
            cpu = {label: cpu_seconds(p.pid) - before[label] for label, p in procs.items()}
            latencies: dict[str, list[float]] = {label: [] for label in trees}
            order = list(trees)
            for k in range(changes):
                name = f"new{k}"
                for label in order if k % 2 == 0 else reversed(order):
                    written = time.monotonic()
                    egress_ip(dirs[label], name)
                    if wait(lambda d=dirs[label], n=name: status_path(d, n).exists(), CHANGE_TIMEOUT):
                        latencies[label].append((time.monotonic() - written) * 1e3)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGTERM)
            for p in procs.values():
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    return {
        label: {
            "cpu_ms_per_s": cpu[label] * 1e3 / seconds,
            "changes": changes,
            "changes_seen": len(latencies[label]),
            "latency_p50_ms": statistics.median(latencies[label]) if latencies[label] else float("nan"),
            "latency_max_ms": max(latencies[label]) if latencies[label] else float("nan"),
        }
        for label in trees
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", type=Path, help="a checkout of the code to compare with (its magw/ package)")
    ap.add_argument("--objects", type=int, default=20, help="GlobalEgressIPs in each directory")
    ap.add_argument("--gateways", type=int, default=4, help="gateway Nodes, each with an Endpoint file touched 1/s")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long CPU is measured")
    ap.add_argument("--changes", type=int, default=10, help="new GlobalEgressIPs timed after that")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    if not 0 <= args.objects <= MAX_OBJECTS or not 1 <= args.gateways <= MAX_GATEWAYS:
        ap.error(f"--objects must be 0..{MAX_OBJECTS} and --gateways 1..{MAX_GATEWAYS}")
    if not 5 <= args.seconds <= MAX_SECONDS or not 1 <= args.changes <= MAX_CHANGES:
        ap.error(f"--seconds must be 5..{MAX_SECONDS} and --changes 1..{MAX_CHANGES}")
    trees = {"this tree": ROOT}
    if args.baseline is not None:
        if not (args.baseline / "magw" / "daemons" / "globalnet" / "main.py").is_file():
            ap.error(f"--baseline: {args.baseline} holds no magw/daemons/globalnet/main.py")
        trees["baseline"] = args.baseline.resolve()
    load = os.getloadavg()
    out = run(trees, args.gateways, args.objects, args.seconds, args.changes)
    print(f"{args.gateways} gateways (Endpoint files touched 1/s each), {args.objects} GlobalEgressIPs, "
          f"{args.seconds:.0f} s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    print(f"{'tree':<10} {'CPU ms/s':>9} {'changes served':>15} {'latency p50':>12} {'max':>9}")
    for label, f in out.items():
        print(f"{label:<10} {f['cpu_ms_per_s']:>9.1f} {int(f['changes_seen']):>7}/{int(f['changes']):<7} "
              f"{f['latency_p50_ms']:>9.1f} ms {f['latency_max_ms']:>6.1f} ms")  # fmt: skip
    if "baseline" in out:
        ratio = out["baseline"]["cpu_ms_per_s"] / max(out["this tree"]["cpu_ms_per_s"], 1e-9)
        print(f"CPU: baseline / this tree = {ratio:.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "load": load, "trees": out}, indent=2, default=str))


if __name__ == "__main__":
    main()
