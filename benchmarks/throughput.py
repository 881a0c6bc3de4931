"""Aggregate inter-cluster throughput with 1, 2 and 4 active gateways per cluster, each WAN link shaped by tbf.

For each gateway count N it builds a lab (east, west; N gateways and 2 workers
with 2 pods each per cluster; every gateway's WAN egress shaped to --rate),
runs iperf3 from every east worker pod to a west worker pod with --streams
parallel TCP streams for --duration seconds, --repeat times, and removes the
lab. Every lab is removed, also on failure or Ctrl-C.

What it prints, so that a figure can be trusted:

* the physical bound: N x the shaped rate, plus what tbf's bucket lets through
  once on top of it (N x burst bytes over the run), both read back from the
  kernel (``tc -j qdisc show``) on the east gateways' WAN links;
* per run: the total iperf3 received (TCP payload, so a few % under the bound
  by headers: Ethernet + IP + UDP + VXLAN + inner IP/TCP), the bytes each east
  gateway's tbf sent (``tc -s``; shows whether all N gateways carried traffic),
  the CPU the iperf3 processes used (getrusage of the children) and the
  machine's busy share from /proc/stat (other users included);
* the median and the spread (min..max) of the totals, and the median against
  0.95 x N x rate. A run whose machine was busy >= 90 % is flagged ``cpu``:
  its figure says more about the CPU than about the gateways.
* ``--control``: one more run with N gateways and no shaping, to show what
  the machine itself can carry (when that is not far above N x rate, the CPU
  is the limit).

    sudo .venv/bin/python benchmarks/throughput.py [--rate 50mbit] [--gateways 1,2,4]
        [--duration 5] [--streams 8] [--repeat 3] [--control] [--name bench]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

import attrs

from magw.lab import build
from magw.lab.layout import LabLayout, PodLayout, layout
from magw.lab.naming import WAN_IF
from magw.lab.topology import parse_topology
from magw.logsetup import configure_logging

IPERF_PORT = 5201


def _worker_pods(lab: LabLayout, cluster: int) -> list[PodLayout]:
    c = lab.clusters[cluster]
    return [p for n in c.nodes if not n.gateway for p in c.pods_of(n.name)]


def _start_servers(pods: Sequence[PodLayout]) -> list[subprocess.Popen[bytes]]:
    """One one-shot iperf3 server per pod (-1: exits after one test)."""
    return [
        subprocess.Popen(
            ["ip", "netns", "exec", p.namespace, "iperf3", "-s", "-1", "-p", str(IPERF_PORT)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in pods
    ]


def _client_argv(client: PodLayout, server: PodLayout, duration: int, streams: int) -> list[str]:
    iperf = ["iperf3", "-c", str(server.ip), "-p", str(IPERF_PORT), "-J", "-t", str(duration), "-P", str(streams)]
    return ["ip", "netns", "exec", client.namespace, *iperf, "--connect-timeout", "3000"]


def _run_clients(clients: Sequence[PodLayout], servers: Sequence[PodLayout], duration: int, streams: int) -> float:
    """Run the iperf3 clients in parallel; the sum of their received bits per second."""
    procs = [
        subprocess.Popen(_client_argv(c, s, duration, streams), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for c, s in zip(clients, servers, strict=False)
    ]
    total = 0.0
    for p in procs:
        out, _err = p.communicate(timeout=duration + 30)
        doc = json.loads(out or b"{}")
        if "error" in doc:
            raise RuntimeError(f"iperf3: {doc['error']}")
        total += float(doc["end"]["sum_received"]["bits_per_second"])
    return total


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


@attrs.frozen
class Run:
    total_bps: float  # iperf3 received, all clients
    bound_bps: float  # N x rate + N x burst over the run (tc's figures)
    gateway_bytes: tuple[int, ...]  # bytes each east gateway's tbf sent during the run
    iperf_cpu: float  # CPU seconds of the iperf3 processes (user + system)
    machine_busy: float  # share of all CPUs busy during the run (/proc/stat, everyone's load)
    wall: float  # seconds from starting the clients to the last one's exit


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _tbf(namespace: str) -> tuple[int, int, int]:
    """(rate bytes/s, burst bytes, bytes sent) of the tbf on the gateway's WAN link; zeros when unshaped."""
    out = subprocess.run(
        ["tc", "-s", "-j", "-n", namespace, "qdisc", "show", "dev", WAN_IF],
        check=True, capture_output=True, text=True, timeout=10,
    ).stdout  # fmt: skip
    for q in json.loads(out):
        if q.get("kind") == "tbf":
            opts = q.get("options", {})
            return int(opts.get("rate", 0)), int(opts.get("burst", 0)), int(q.get("bytes", 0))
    sent = sum(int(q.get("bytes", 0)) for q in json.loads(out) if q.get("root"))
    return 0, 0, sent


def _one_run(lab: LabLayout, duration: int, streams: int) -> Run:
    gws = [n.namespace for n in lab.clusters[0].nodes if n.gateway]
    server_pods = _worker_pods(lab, 1)
    servers = _start_servers(server_pods)
    try:
        time.sleep(0.5)  # let the servers bind
        before = [_tbf(ns) for ns in gws]
        cpu0 = _cpu_times()
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        total = _run_clients(_worker_pods(lab, 0), server_pods, duration, streams)
        wall = time.monotonic() - started
        cpu1 = _cpu_times()
    finally:
        _stop(servers)
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # clients and servers are waited for by now
    after = [_tbf(ns) for ns in gws]
    rate_bits = sum(a[0] for a in after) * 8
    burst_bits = sum(a[1] for a in after) * 8
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    busy = (cpu1[0] - cpu0[0]) / max(cpu1[1] - cpu0[1], 1)
    return Run(
        total_bps=total,
        bound_bps=rate_bits + burst_bits / duration,
        gateway_bytes=tuple(a[2] - b[2] for a, b in zip(after, before, strict=True)),
        iperf_cpu=cpu / wall,
        machine_busy=busy,
        wall=wall,
    )


def measure(name: str, gateways: int, rate: str | None, duration: int, streams: int, repeat: int) -> list[Run]:
    """``repeat`` runs east -> west with ``gateways`` gateways per cluster, in one lab (None rate: unshaped)."""
    topo = parse_topology(
        {
            **({"wan_rate": rate} if rate else {}),
            "clusters": [
                {"id": "east", "gateways": gateways, "workers": 2, "pods_per_node": 2},
                {"id": "west", "gateways": gateways, "workers": 2, "pods_per_node": 2},
            ],
        }
    )
    lab_name = f"{name}{gateways}"
    lab = layout(lab_name, topo)
    try:
        build.up(topo, name=lab_name, daemons=True, wait_timeout=90, progress=lambda line: print(f"  {line}"))
        runs = []
        for i in range(repeat):
            run = _one_run(lab, duration, streams)
            runs.append(run)
            print(
                f"  run {i + 1}: {run.total_bps / 1e6:.1f} Mbit/s of bound {run.bound_bps / 1e6:.1f}"
                f" ({run.total_bps / run.bound_bps if run.bound_bps else 0:.3f}); per gateway"
                f" {', '.join(f'{b * 8 / run.wall / 1e6:.1f}' for b in run.gateway_bytes)} Mbit/s through tbf"
                f" over {run.wall:.1f} s;"
                f" iperf3 CPU {run.iperf_cpu:.2f} cores; machine busy {run.machine_busy:.0%}"
                + (" [cpu]" if run.machine_busy >= CPU_BOUND else ""),
                flush=True,
            )
        return runs
    finally:
        build.down(lab_name)


CPU_BOUND = 0.9


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", default="50mbit", help="tbf rate on every gateway's WAN link (default 50mbit)")
    parser.add_argument("--gateways", default="1,2,4", help="comma-separated gateway counts (default 1,2,4)")
    parser.add_argument("--duration", type=int, choices=range(1, 61), default=5, metavar="1..60",
                        help="iperf3 seconds per run (default 5)")  # fmt: skip
    parser.add_argument("--streams", type=int, choices=range(1, 65), default=8, metavar="1..64",
                        help="parallel TCP streams per client pod (default 8)")  # fmt: skip
    parser.add_argument("--repeat", type=int, choices=range(1, 21), default=3, metavar="1..20",
                        help="runs per gateway count; the median and the spread are printed (default 3)")  # fmt: skip
    parser.add_argument("--control", action="store_true", help="one more run, unshaped, with the largest N")
    parser.add_argument("--name", default="bench", help="lab name prefix (the gateway count is appended)")
    parser.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    args = parser.parse_args(argv)
    configure_logging("console", args.log_level)
    counts = [int(x) for x in args.gateways.split(",")]
    print(f"nproc {os.cpu_count()}; kernel {os.uname().release}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results: dict[int, list[Run]] = {}
    for n in counts:
        print(f"== {n} gateway(s) per cluster, WAN {args.rate} each, {args.repeat} run(s)")
        results[n] = measure(args.name, n, args.rate, args.duration, args.streams, args.repeat)
    control: list[Run] = []
    if args.control:
        print(f"== control: {max(counts)} gateway(s), WAN unshaped")
        control = measure(args.name + "c", max(counts), None, args.duration, args.streams, 1)
    header = f"{'gateways':>8} {'median':>8} {'min..max Mbit/s':>17} {'bound':>7} {'med/bound':>9} {'target':>6}  ok"
    print(f"\n{header}  cpu-flagged runs")
    ok = True
    for n in counts:
        totals = [r.total_bps / 1e6 for r in results[n]]
        bound = statistics.median(r.bound_bps for r in results[n]) / 1e6
        nominal = n * _rate_mbit(args.rate)
        median = statistics.median(totals)
        above = median > 1.02 * bound  # more than tbf can pass: the figure itself is wrong, not a success
        good = median >= 0.95 * nominal and not above
        ok &= good
        flagged = sum(r.machine_busy >= CPU_BOUND for r in results[n])
        print(
            f"{n:>8} {median:>8.1f} {min(totals):>8.1f}..{max(totals):<8.1f} {bound:>7.1f} {median / bound:>9.3f}"
            f" {median / nominal:>6.3f}  {'yes' if good else 'NO'}  {flagged}/{len(totals)}"
            + ("  ABOVE THE BOUND: tbf passed more than its rate, see docs/performance.md" if above else "")
        )
    print(f"(bound: N x rate + N x tbf burst / {args.duration} s, from tc; target: median >= 0.95 x N x rate;")
    print(f" the target column is median / (N x {args.rate}); cpu-flagged: machine busy >= {CPU_BOUND:.0%})")
    if control:
        print(f"control, unshaped, {max(counts)} gateways: {control[0].total_bps / 1e6:.1f} Mbit/s, machine busy"
              f" {control[0].machine_busy:.0%} (what the machine can carry without tbf)")  # fmt: skip
    return 0 if ok else 1


def _rate_mbit(rate: str) -> float:
    units = {"kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}
    for unit, scale in units.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * scale
    raise SystemExit(f"--rate: {rate!r} has no kbit/mbit/gbit unit")


if __name__ == "__main__":
    sys.exit(main())
