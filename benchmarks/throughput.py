"""Aggregate inter-cluster throughput with 1, 2 and 4 active gateways per cluster, each WAN link shaped by tbf.

For each gateway count N it builds a lab (east, west; N gateways and 2 workers
with 2 pods each per cluster; every gateway's WAN egress shaped to --rate),
runs iperf3 from every east worker pod to a west worker pod with --streams
parallel TCP streams for --duration seconds, --repeat times, and removes the
lab. Every lab is removed, also on failure or Ctrl-C.

What it prints, so that a figure can be trusted:

* the shaping in use and the physical bound: N x the shaped rate, plus what
  tbf's bucket lets through once on top of it (N x burst bytes over the
  measured window), both read back from the kernel (``tc -j qdisc show``) on
  the east gateways' WAN links;
* per run: the total the west pods received while every client was sending
  (see below; TCP payload, so a few % under the bound by headers: Ethernet +
  IP + UDP + VXLAN + inner IP/TCP), the sum of the clients' own iperf3 rates
  for comparison, the bytes each east gateway's tbf sent (``tc -s``; shows
  whether all N gateways carried traffic), the payload's share of those bytes
  and so the total as WAN bytes (``wan-use``: tbf counts headers against its
  rate, the payload is at most 0.923 of it at the tunnel MTU 1450), the CPU
  the iperf3 processes used (getrusage of the children), the machine's busy
  share from /proc/stat (other users included) and how many peers the route
  agents declared down during the run (their logs: a saturated WAN delays the
  gateways' probes by up to tbf's latency bound, 50 ms in the lab, beyond the
  probe timeout, and a down peer withdraws the cluster's routes for a while;
  such a run is flagged ``health``; a client that cannot connect then fails
  the run, which is printed and has no figure);
* the median and the spread (min..max) of the totals, and the median against
  0.95 x N x rate. A run whose machine was busy >= 90 % is flagged ``cpu``:
  its figure says more about the CPU than about the gateways.
* why not simply the sum of the iperf3 rates: the clients do not start
  together. The first one fills tbf's queue within milliseconds, the others'
  connection set-up packets wait behind it or are dropped (tbf drops at its
  50 ms latency limit), so they start 0.5-1 s later, and each iperf3 divides
  its bytes by its own window. Summed over windows that overlap only in part,
  the rates exceed what the link carried (62 Mbit/s through a 50mbit tbf
  whose own byte counter says 49.8). So the benchmark reads every west
  server pod's receive counter (``/proc/<iperf3 pid>/net/dev``, no process
  spawned) every 0.1 s and takes the total over the window in which all of
  them were receiving, scaled from frames to TCP payload by the ratio of
  iperf3's received bytes to the frames' bytes over the whole run.
* ``--control``: one more run with N gateways and no shaping, to show what
  the machine itself can carry (when that is not far above N x rate, the CPU
  is the limit).

    sudo .venv/bin/python benchmarks/throughput.py [--rate 50mbit] [--gateways 1,2,4]
        [--duration 5] [--streams 8] [--repeat 3] [--control] [--latency 10ms] [--name bench]
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
from typing import Any

import attrs

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.rx_window import Sampler, common_window  # after sys.path
from magw.lab.build import lifecycle as build
from magw.lab.build import (
    netns,
    wiring,  # after sys.path
)
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, PodLayout, layout  # after sys.path
from magw.lab.spec.naming import WAN_IF  # after sys.path
from magw.lab.spec.topology import parse_topology  # after sys.path
from magw.util.logsetup import configure_logging  # after sys.path

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


@attrs.frozen
class ClientTotals:
    rates_bps: float  # sum of the clients' own iperf3 received rates (each over its own window)
    payload_bytes: int  # TCP payload the servers received, all clients


def _run_clients(
    clients: Sequence[PodLayout], servers: Sequence[PodLayout], duration: int, streams: int
) -> ClientTotals:
    """Run the iperf3 clients in parallel; their received rates and bytes, summed."""
    procs = [
        subprocess.Popen(_client_argv(c, s, duration, streams), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for c, s in zip(clients, servers, strict=False)
    ]
    docs = [json.loads(p.communicate(timeout=duration + 30)[0] or b"{}") for p in procs]
    errors = sorted({str(d.get("error", "no output")) for d in docs if "error" in d or "end" not in d})
    if errors:
        raise RunFailed(f"iperf3: {'; '.join(errors)}")
    return ClientTotals(
        rates_bps=sum(float(d["end"]["sum_received"]["bits_per_second"]) for d in docs),
        payload_bytes=sum(int(d["end"]["sum_received"]["bytes"]) for d in docs),
    )


class RunFailed(Exception):
    """A run without a figure (a client could not connect, or the clients never sent together)."""


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


def _health_downs(lab_name: str) -> int:
    """Peers the lab's route agents have declared down so far (``health.state_changed`` to down in their logs).

    A worker whose gateway is down for the remote cluster makes the cluster's routes unreachable,
    so every such transition during a run is an outage the throughput figure includes.
    """
    downs = 0
    for log in sorted((naming.state_dir(lab_name) / "logs").glob("route-agent-*.log")):
        with open(log) as f:
            downs += sum('"health.state_changed"' in line and '"new": "down"' in line for line in f)
    return downs


@attrs.frozen
class Run:
    total_bps: float  # TCP payload received by all server pods while every client was sending
    iperf_sum_bps: float  # sum of the clients' own iperf3 rates (windows overlap only in part)
    window: float  # seconds in which every client was sending (total_bps is over this)
    bound_bps: float  # N x rate + N x burst over the window (tc's figures)
    gateway_bytes: tuple[int, ...]  # bytes each east gateway's tbf sent during the run
    iperf_cpu: float  # CPU seconds of the iperf3 processes (user + system)
    machine_busy: float  # share of all CPUs busy during the run (/proc/stat, everyone's load)
    wall: float  # seconds from starting the clients to the last one's exit
    health_downs: int  # peers the route agents declared down during the run (each withdraws routes for a while)
    payload_share: float  # TCP payload / bytes the east gateways' tbf sent (the rest: headers and encapsulation)

    @property
    def wan_bps(self) -> float:
        """The total as bytes on the WAN links (what tbf counts against its rate)."""
        return self.total_bps / self.payload_share if self.payload_share else 0.0


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _wan_qdiscs(namespace: str) -> list[dict[str, Any]]:
    """``tc -s -j qdisc show`` of the gateway's WAN link."""
    out = subprocess.run(
        ["tc", "-s", "-j", "-n", namespace, "qdisc", "show", "dev", WAN_IF],
        check=True, capture_output=True, text=True, timeout=10,
    ).stdout  # fmt: skip
    qdiscs: list[dict[str, Any]] = json.loads(out)
    return qdiscs


def _tbf(namespace: str) -> tuple[int, int, int]:
    """(rate bytes/s, burst bytes, bytes sent) of the tbf on the gateway's WAN link; zeros when unshaped."""
    qdiscs = _wan_qdiscs(namespace)
    for q in qdiscs:
        if q.get("kind") == "tbf":
            opts = q.get("options", {})
            return int(opts.get("rate", 0)), int(opts.get("burst", 0)), int(q.get("bytes", 0))
    return 0, 0, sum(int(q.get("bytes", 0)) for q in qdiscs if q.get("root"))


def _one_run(lab: LabLayout, duration: int, streams: int) -> Run:
    gws = [n.namespace for n in lab.clusters[0].nodes if n.gateway]
    server_pods = _worker_pods(lab, 1)
    servers = _start_servers(server_pods)
    downs0 = _health_downs(lab.name)
    try:
        time.sleep(0.5)  # let the servers bind
        before = [_tbf(ns) for ns in gws]
        cpu0 = _cpu_times()
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        with Sampler(servers, server_pods) as sampler:
            clients = _run_clients(_worker_pods(lab, 0), server_pods, duration, streams)
        wall = time.monotonic() - started
        cpu1 = _cpu_times()
    except RunFailed as exc:
        raise RunFailed(f"{exc}; health: {_health_downs(lab.name) - downs0} peer(s) declared down") from exc
    finally:
        _stop(servers)
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # clients and servers are waited for by now
    after = [_tbf(ns) for ns in gws]
    gateway_bytes = tuple(a[2] - b[2] for a, b in zip(after, before, strict=True))
    downs = _health_downs(lab.name) - downs0
    rate_bits = sum(a[0] for a in after) * 8
    burst_bits = sum(a[1] for a in after) * 8
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    busy = (cpu1[0] - cpu0[0]) / max(cpu1[1] - cpu0[1], 1)
    window = common_window(sampler.samples)
    if window is None:
        raise RunFailed("the iperf3 clients were never all sending at the same time")
    samples = sampler.samples
    frames = sum(samples[-1][1]) - sum(samples[0][1])
    span = window.end - window.start
    return Run(
        total_bps=window.bytes * 8 / span * clients.payload_bytes / max(frames, 1),
        iperf_sum_bps=clients.rates_bps,
        window=span,
        bound_bps=rate_bits + burst_bits / span,
        gateway_bytes=gateway_bytes,
        iperf_cpu=cpu / wall,
        machine_busy=busy,
        wall=wall,
        health_downs=downs,
        payload_share=clients.payload_bytes / max(sum(gateway_bytes), 1),
    )


def _describe(run: Run) -> str:
    shaped = run.bound_bps > 0
    return (
        f"{run.total_bps / 1e6:.1f} Mbit/s"
        + (f" of bound {run.bound_bps / 1e6:.1f} ({run.total_bps / run.bound_bps:.3f})" if shaped else "")
        + f" over the {run.window:.1f} s all clients sent (sum of iperf3's own rates {run.iperf_sum_bps / 1e6:.1f})"
        + (
            f"; per gateway {', '.join(f'{b * 8 / run.wall / 1e6:.1f}' for b in run.gateway_bytes)} Mbit/s"
            f" through tbf over the whole {run.wall:.1f} s; payload {run.payload_share:.3f} of the WAN bytes,"
            f" so {run.wan_bps / 1e6:.1f} Mbit/s on the WAN"
            if shaped
            else ""
        )
        + f"; iperf3 CPU {run.iperf_cpu:.2f} cores; machine busy {run.machine_busy:.0%}"
        + f"; health: {run.health_downs} peer(s) declared down"
        + (" [cpu]" if run.machine_busy >= CPU_BOUND else "")
        + (" [health]" if run.health_downs else "")
    )


def _shaping(namespace: str) -> str:
    for q in _wan_qdiscs(namespace):
        if q.get("kind") == "tbf":
            o = q["options"]
            return f"tbf rate {o['rate'] * 8 / 1e6:g} Mbit/s burst {o['burst']} B latency {o['lat'] / 1000:g} ms"
    return "none"


def measure(
    name: str, gateways: int, rate: str | None, latency: str | None, duration: int, streams: int, repeat: int
) -> list[Run | RunFailed]:
    """``repeat`` runs east -> west with ``gateways`` gateways per cluster, in one lab (None rate: unshaped).

    ``latency``: replace the lab's tbf with one of this queue bound on every gateway (None: the lab's).
    """
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
        if rate and latency:
            for gw in (n for n in lab.nodes if n.gateway):
                netns.run(wiring.tbf_argv(gw.namespace, rate, latency))
        shaping = sorted({_shaping(n.namespace) for n in lab.clusters[0].nodes if n.gateway})
        print(f"  shaping (tc, east gateways' {WAN_IF}): {', '.join(shaping)}", flush=True)
        runs: list[Run | RunFailed] = []
        for i in range(repeat):
            try:
                run = _one_run(lab, duration, streams)
            except RunFailed as exc:
                runs.append(exc)
                print(f"  run {i + 1}: FAILED, no figure: {exc}", flush=True)
                continue
            runs.append(run)
            print(f"  run {i + 1}: {_describe(run)}", flush=True)
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
    parser.add_argument("--latency", default=None, metavar="MS",
                        help="tbf queue bound on every gateway, e.g. 10ms (default: the lab's, 50ms)")  # fmt: skip
    parser.add_argument("--name", default="bench", help="lab name prefix (the gateway count is appended)")
    parser.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    args = parser.parse_args(argv)
    configure_logging("console", args.log_level)
    counts = [int(x) for x in args.gateways.split(",")]
    print(f"nproc {os.cpu_count()}; kernel {os.uname().release}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    results: dict[int, list[Run | RunFailed]] = {}
    for n in counts:
        print(f"== {n} gateway(s) per cluster, WAN {args.rate} each, {args.repeat} run(s)")
        results[n] = measure(args.name, n, args.rate, args.latency, args.duration, args.streams, args.repeat)
    control: list[Run | RunFailed] = []
    if args.control:
        print(f"== control: {max(counts)} gateway(s), WAN unshaped")
        control = measure(args.name + "c", max(counts), None, None, args.duration, args.streams, 1)
    return 0 if _summary(args.rate, counts, results, control) else 1


def _summary(
    rate: str, counts: Sequence[int], results: dict[int, list[Run | RunFailed]], control: Sequence[Run | RunFailed]
) -> bool:
    """The table: per N the median and spread of the runs with a figure, and what limited them."""
    header = f"{'gateways':>8} {'median':>8} {'min..max Mbit/s':>17} {'bound':>7} {'med/bound':>9} {'target':>6}  ok"
    print(f"\n{header}  wan-use  failed  cpu-flagged  health-flagged (peers declared down)")
    ok = True
    for n in counts:
        runs = [r for r in results[n] if isinstance(r, Run)]
        failed = len(results[n]) - len(runs)
        if not runs:
            ok = False
            print(f"{n:>8} {'-':>8} {'-':>17} {'-':>7} {'-':>9} {'-':>6}  NO  {'-':>7}  {failed}/{failed}")
            continue
        totals = [r.total_bps / 1e6 for r in runs]
        bound = statistics.median(r.bound_bps for r in runs) / 1e6
        nominal = n * _rate_mbit(rate)
        median = statistics.median(totals)
        above = median > 1.02 * bound  # more than tbf can pass: a measurement error, not a success
        good = median >= 0.95 * nominal and not above and not failed
        ok &= good
        cpu = sum(r.machine_busy >= CPU_BOUND for r in runs)
        health = [r.health_downs for r in runs if r.health_downs]
        wan_use = statistics.median(r.wan_bps for r in runs) / 1e6 / nominal
        print(
            f"{n:>8} {median:>8.1f} {min(totals):>8.1f}..{max(totals):<8.1f} {bound:>7.1f} {median / bound:>9.3f}"
            f" {median / nominal:>6.3f}  {'yes' if good else 'NO':<3}  {wan_use:>7.3f}  {failed}/{len(results[n])}"
            f"  {cpu}/{len(runs)}  {len(health)}/{len(runs)} ({sum(health)})"
            + ("  ABOVE THE BOUND: the measurement is wrong, see docs/performance.md" if above else "")
        )
    print("(bound: N x rate + N x tbf burst / window, from tc; target: median >= 0.95 x N x rate;")
    print(f" the target column is median / (N x {rate}); cpu-flagged: machine busy >= {CPU_BOUND:.0%};")
    print(" wan-use: the median as WAN bytes (payload + TCP/IP + VXLAN headers, tc's count) / (N x rate): the")
    print(" payload is at most (MTU - 52) / (MTU + 64) of the WAN bytes, 0.923 at the tunnel MTU 1450;")
    print(" health-flagged: route agents declared a peer down during the run, which withdraws routes for a while)")
    if control and isinstance(control[0], Run):
        print(f"control, unshaped, {max(counts)} gateways: {control[0].total_bps / 1e6:.1f} Mbit/s, machine busy"
              f" {control[0].machine_busy:.0%}, health: {control[0].health_downs} peer(s) declared down"
              " (what the machine can carry without tbf)")  # fmt: skip
    elif control:
        print(f"control, unshaped: FAILED: {control[0]}")
    return ok


def _rate_mbit(rate: str) -> float:
    units = {"kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}
    for unit, scale in units.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * scale
    raise SystemExit(f"--rate: {rate!r} has no kbit/mbit/gbit unit")


if __name__ == "__main__":
    sys.exit(main())
