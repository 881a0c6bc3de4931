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

``--cable wireguard`` (or ``vxlan,wireguard``: both, one lab per cable and N,
the cables of one N run one after the other so that they see the same load)
builds the labs with the WireGuard cable: the inter-cluster VXLAN goes through
one wireguard-go device per gateway (``magw-wg``). What changes:

* the headers: WireGuard adds 60 bytes per packet (outer IP, UDP, its header
  and tag) and the tunnel MTU is 1390 instead of 1450, so the TCP payload is
  at most (1390 - 52) / (1390 + 64 + 60) = 0.884 of what tbf counts, not
  0.923 (``wan-use`` is measured from tc's bytes either way);
* the CPU: wireguard-go encrypts in user space, packet by packet. Per run the
  CPU seconds of the lab's wireguard-go processes (both clusters' gateways;
  ``/proc/<pid>/stat`` utime + stime before and after, the pids from
  ``<state dir>/wireguard/wireguard-go.pid``) are measured beside iperf3's,
  and a second table prints, per cable and N, the aggregate against N x one
  tunnel's rate measured in the same invocation (the median of its 1-gateway
  lab; goal >= 0.9) and the CPU seconds per gigabit of payload: iperf3's,
  wireguard-go's and the whole machine's (``/proc/stat`` busy time: the
  kernel's softirq work, VXLAN's included, and other users' load too), the
  last two less what they used while the lab idled for 2 s before the run
  (the daemons' probes). With both cables the two are printed side by side.
  Per-gigabit figures grow at low rates (fixed costs): compare the cables at
  the same rate.
* ``--rate none`` runs unshaped (no tbf; every run is then its own control).
  On the 2-vCPU machine of docs/performance.md one WireGuard tunnel carried
  about 80 Mbit/s unshaped (wireguard-go 1.2 cores, 2026-11-28; VXLAN 6.4
  Gbit/s), so with the default 50mbit per gateway the CPU, not tbf, is the
  limit from N = 2 on, and unshaped every N shares the same two cores: the
  ratio against N x one tunnel then says how the CPU is shared, not whether
  the gateways scale. For that, shape well below a tunnel's own rate (e.g.
  ``--rate 10mbit``) and watch the busy column.

``--cni ovn``: per N, the plain lab and then an OVN lab (``magw lab up --cni ovn``: pods on Open vSwitch's
userspace datapath, ECMP by OVN's gateway routers), same topology, same runs; both tables and the ratio OVN / plain
(benchmarks/ovn_throughput.py).

Default: ``--cable vxlan --rate 50mbit``, whose output is what it always was.

    sudo .venv/bin/python benchmarks/throughput.py [--rate 50mbit|none] [--gateways 1,2,4]
        [--duration 5] [--streams 8] [--repeat 3] [--control] [--latency 10ms] [--name bench]
        [--cable vxlan|wireguard|vxlan,wireguard] [--cni ovn]
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.rx_window import Sampler, common_window  # after sys.path
from magw.drivers.wireguard.keys import KEY_DIR  # after sys.path
from magw.lab.build import lifecycle as build
from magw.lab.build import (
    netns,
    wiring,  # after sys.path
)
from magw.lab.build.state import LabState  # after sys.path
from magw.lab.planes.daemons import node_state_dir  # after sys.path
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, PodLayout, layout  # after sys.path
from magw.lab.spec.naming import WAN_IF  # after sys.path
from magw.lab.spec.topology import parse_topology  # after sys.path
from magw.model.cable import Cable  # after sys.path
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
    iperf_cpu_s: float = 0.0  # CPU seconds of the iperf3 processes over the run (iperf_cpu is this / wall)
    wg_cpu_s: float | None = None  # CPU seconds of the lab's wireguard-go processes (None: the VXLAN cable)
    wg_restarted: bool = False  # a wireguard-go process exited during the run: wg_cpu_s misses its share
    machine_cpu_s: float = 0.0  # busy CPU seconds of the whole machine (/proc/stat; softirq and other users too)
    payload_bytes: int = 0  # TCP payload the servers received over the whole run
    idle_machine: float = 0.0  # machine busy cores while the lab idled just before (0: not measured)
    idle_wg: float = 0.0  # wireguard-go cores while the lab idled (its share of the probes)

    @property
    def payload_gbit(self) -> float:
        return self.payload_bytes * 8 / 1e9

    @property
    def process_cpu_per_gbit(self) -> float:
        """CPU seconds of iperf3 and wireguard-go per gigabit of payload."""
        return (self.iperf_cpu_s + (self.wg_cpu_s or 0.0)) / self.payload_gbit if self.payload_bytes else 0.0

    @property
    def machine_cpu_per_gbit(self) -> float:
        return self.machine_cpu_s / self.payload_gbit if self.payload_bytes else 0.0

    @property
    def net_machine_per_gbit(self) -> float:
        """The machine's busy CPU seconds per gigabit less what the idle lab used for as long."""
        return (self.machine_cpu_s - self.idle_machine * self.wall) / self.payload_gbit if self.payload_bytes else 0.0

    @property
    def net_wg_per_gbit(self) -> float | None:
        if self.wg_cpu_s is None or not self.payload_bytes:
            return None
        return (self.wg_cpu_s - self.idle_wg * self.wall) / self.payload_gbit

    @property
    def wan_bps(self) -> float:
        """The total as bytes on the WAN links (what tbf counts against its rate)."""
        return self.total_bps / self.payload_share if self.payload_share else 0.0


CLK_TCK = os.sysconf("SC_CLK_TCK")
WG_PIDFILE = "wireguard-go.pid"  # magw.drivers.wireguard.userspace, in the node's <state dir>/wireguard


def wireguard_pids(st: LabState, lab: LabLayout) -> dict[int, str]:
    """pid -> gateway of every running wireguard-go of the lab (their pid files, each checked to be wireguard-go)."""
    out: dict[int, str] = {}
    for gw in lab.gateways:
        try:
            text = (node_state_dir(st, gw) / KEY_DIR / WG_PIDFILE).read_text().strip()
            comm = Path(f"/proc/{int(text)}/comm").read_text().strip() if text.isdigit() else ""
        except OSError:
            continue
        if comm == "wireguard-go":
            out[int(text)] = gw.name
    return out


def proc_cpu_s(pid: int) -> float | None:
    """utime + stime of ``pid`` (all its threads) in seconds, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # fields from 3 (state) on: utime is field 14, stime 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class WgCpu:
    """CPU seconds the lab's wireguard-go processes used between ``start`` and ``stop``."""

    def __init__(self, pids: Callable[[], dict[int, str]]) -> None:
        self._pids = pids
        self._before: dict[int, float] = {}
        self.seconds = 0.0
        self.restarted = False

    def start(self) -> None:
        self._before = {pid: t for pid in self._pids() if (t := proc_cpu_s(pid)) is not None}

    def stop(self) -> None:
        after = {pid: proc_cpu_s(pid) for pid in self._before}
        self.seconds = sum(t - self._before[pid] for pid, t in after.items() if t is not None)
        self.restarted = any(t is None for t in after.values()) or set(self._pids()) != set(self._before)


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


def _idle(wg: WgCpu | None, seconds: float) -> tuple[float, float]:
    """(machine busy cores, wireguard-go cores) while the lab idles for ``seconds``: the daemons' probes, other
    users; subtracted from a run's CPU in the scaling table."""
    cpu0 = _cpu_times()
    if wg is not None:
        wg.start()
    started = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - started
    cpu1 = _cpu_times()
    if wg is not None:
        wg.stop()
    return (cpu1[0] - cpu0[0]) / CLK_TCK / wall, (wg.seconds / wall if wg is not None else 0.0)


def _one_run(lab: LabLayout, duration: int, streams: int, wg: WgCpu | None = None, idle: float = 0.0) -> Run:
    """One run; ``wg``: the lab's wireguard-go processes, whose CPU is added (the WireGuard cable); ``idle``:
    seconds of an idle lab measured first (0: none, as before --cable)."""
    gws = [n.namespace for n in lab.clusters[0].nodes if n.gateway]
    server_pods = _worker_pods(lab, 1)
    servers = _start_servers(server_pods)
    downs0 = _health_downs(lab.name)
    try:
        time.sleep(0.5)  # let the servers bind
        idle_machine, idle_wg = _idle(wg, idle) if idle else (0.0, 0.0)
        before = [_tbf(ns) for ns in gws]
        cpu0 = _cpu_times()
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if wg is not None:
            wg.start()
        started = time.monotonic()
        with Sampler(servers, server_pods) as sampler:
            clients = _run_clients(_worker_pods(lab, 0), server_pods, duration, streams)
        wall = time.monotonic() - started
        cpu1 = _cpu_times()
        if wg is not None:
            wg.stop()
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
        iperf_cpu_s=cpu,
        wg_cpu_s=None if wg is None else wg.seconds,
        wg_restarted=wg is not None and wg.restarted,
        machine_cpu_s=(cpu1[0] - cpu0[0]) / CLK_TCK,
        payload_bytes=clients.payload_bytes,
        idle_machine=idle_machine,
        idle_wg=idle_wg,
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
        + (
            f"; wireguard-go CPU {run.wg_cpu_s / run.wall:.2f} cores"
            + (" (a wireguard-go exited during the run: its share is missing)" if run.wg_restarted else "")
            + f"; CPU s per Gbit of payload: processes {run.process_cpu_per_gbit:.2f}"
            f" (iperf3 {run.iperf_cpu_s / run.payload_gbit:.2f} + wireguard-go {run.wg_cpu_s / run.payload_gbit:.2f}),"
            f" machine {run.machine_cpu_per_gbit:.2f}"
            if run.wg_cpu_s is not None and run.payload_bytes
            else ""
        )
    )


def _shaping(namespace: str) -> str:
    for q in _wan_qdiscs(namespace):
        if q.get("kind") == "tbf":
            o = q["options"]
            return f"tbf rate {o['rate'] * 8 / 1e6:g} Mbit/s burst {o['burst']} B latency {o['lat'] / 1000:g} ms"
    return "none"


def lab_name_of(name: str, gateways: int, cable: Cable = Cable.VXLAN, cni: str = "generic") -> str:
    """The lab of one measurement: ``name`` + N (VXLAN, as always), ``name`` + ``wg`` + N (WireGuard); ``o`` before
    N for an OVN lab."""
    ovn = "o" if cni == "ovn" else ""
    return f"{name}{ovn}{gateways}" if cable is Cable.VXLAN else f"{name}wg{ovn}{gateways}"


def measure(
    name: str,
    gateways: int,
    rate: str | None,
    latency: str | None,
    duration: int,
    streams: int,
    repeat: int,
    cable: Cable = Cable.VXLAN,
    idle: float = 0.0,
    cni: str = "generic",
) -> list[Run | RunFailed]:
    """``repeat`` runs east -> west with ``gateways`` gateways per cluster, in one lab (None rate: unshaped).

    ``latency``: replace the lab's tbf with one of this queue bound on every gateway (None: the lab's).
    ``cable``: between the gateways (with WireGuard, the CPU of the lab's wireguard-go processes is measured too).
    ``idle``: seconds of idle lab measured before each run (the CPU baseline of the scaling table; 0: none).
    ``cni``: ``ovn`` for an OVN lab (``magw lab up --cni ovn``; benchmarks/ovn_throughput.py).
    """
    topo = parse_topology(
        {
            **({"wan_rate": rate} if rate else {}),
            **({"cable": cable.value} if cable is not Cable.VXLAN else {}),
            "clusters": [
                {"id": "east", "gateways": gateways, "workers": 2, "pods_per_node": 2},
                {"id": "west", "gateways": gateways, "workers": 2, "pods_per_node": 2},
            ],
        }
    )
    lab_name = lab_name_of(name, gateways, cable, cni)
    lab = layout(lab_name, topo)
    try:
        st = build.up(topo, name=lab_name, daemons=True, wait_timeout=120 if cni == "ovn" else 90, cni=cni,
                      progress=lambda line: print(f"  {line}"))  # fmt: skip
        wg = WgCpu(lambda: wireguard_pids(st, lab)) if cable is Cable.WIREGUARD else None
        if wg is not None:
            print(f"  wireguard-go: {len(wireguard_pids(st, lab))} process(es) for {len(lab.gateways)} gateways",
                  flush=True)  # fmt: skip
        if rate and latency:
            for gw in (n for n in lab.nodes if n.gateway):
                netns.run(wiring.tbf_argv(gw.namespace, rate, latency))
        shaping = sorted({_shaping(n.namespace) for n in lab.clusters[0].nodes if n.gateway})
        print(f"  shaping (tc, east gateways' {WAN_IF}): {', '.join(shaping)}", flush=True)
        runs: list[Run | RunFailed] = []
        for i in range(repeat):
            try:
                run = _one_run(lab, duration, streams, wg, idle)
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
    parser.add_argument("--rate", default="50mbit",
                        help="tbf rate on every gateway's WAN link, or none: unshaped (default 50mbit)")  # fmt: skip
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
    parser.add_argument("--cable", default="vxlan", metavar="vxlan|wireguard|vxlan,wireguard",
                        help="the labs' cable between gateways; both: one lab per cable and N, side by side "
                        "(default vxlan)")  # fmt: skip
    parser.add_argument("--cni", choices=("generic", "ovn"), default="generic",
                        help="ovn: the plain and an OVN lab side by side (benchmarks/ovn_throughput.py)")  # fmt: skip
    parser.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    args = parser.parse_args(argv)
    configure_logging("console", args.log_level)
    if args.cni == "ovn":
        from benchmarks.ovn_throughput import side_by_side

        return side_by_side(parser, args)
    counts = [int(x) for x in args.gateways.split(",")]
    cables = _cables(parser, args.cable)
    rate: str | None = None if args.rate == "none" else args.rate
    if rate is not None:
        _rate_mbit(rate)  # a rate without a unit fails now, not after the first lab
    elif args.latency:
        parser.error("--latency: a tbf queue bound needs a --rate")
    plain = cables == [Cable.VXLAN] and rate is not None  # the output is what it was before --cable and --rate none
    print(f"nproc {os.cpu_count()}; kernel {os.uname().release}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    results: dict[Cable, dict[int, list[Run | RunFailed]]] = {c: {} for c in cables}
    for n in counts:
        for cable in cables:  # the cables of one N back to back: they see about the same load
            wan = f"WAN {rate} each" if rate else "WAN unshaped"
            label = "" if plain else f"cable {cable.value}, "
            print(f"== {n} gateway(s) per cluster, {label}{wan}, {args.repeat} run(s)")
            results[cable][n] = measure(args.name, n, rate, args.latency, args.duration, args.streams, args.repeat,
                                        cable, 0.0 if plain else IDLE_SECONDS)  # fmt: skip
    control: dict[Cable, list[Run | RunFailed]] = {c: [] for c in cables}
    if args.control and rate is None:
        print("== control: skipped, every run is unshaped already (--rate none)")
    elif args.control:
        for cable in cables:
            label = "" if plain else f"cable {cable.value}, "
            print(f"== control: {max(counts)} gateway(s), {label}WAN unshaped")
            control[cable] = measure(args.name + "c", max(counts), None, None, args.duration, args.streams, 1, cable,
                                     0.0 if plain else IDLE_SECONDS)  # fmt: skip
    if plain:
        return 0 if _summary(args.rate, counts, results[Cable.VXLAN], control[Cable.VXLAN]) else 1
    ok = True
    if rate is not None:
        for cable in cables:
            print(f"\n-- cable {cable.value}")
            ok &= _summary(rate, counts, results[cable], control[cable], cable)
    ok &= _scaling(cables, counts, results, rate)
    return 0 if ok else 1


def _cables(parser: argparse.ArgumentParser, text: str) -> list[Cable]:
    names = [c.value for c in Cable]
    cables = []
    for item in text.split(","):
        if item.strip() not in names:
            parser.error(f"--cable: {item.strip()!r} is not one of {', '.join(names)}")
        if Cable(item.strip()) not in cables:
            cables.append(Cable(item.strip()))
    return cables


SCALING_GOAL = 0.9
IDLE_SECONDS = 2.0  # the idle lab measured before each run (not in the plain VXLAN invocation)


def _scaling(
    cables: Sequence[Cable], counts: Sequence[int], results: dict[Cable, dict[int, list[Run | RunFailed]]],
    rate: str | None,
) -> bool:  # fmt: skip
    """Per cable and N: the aggregate against N x one tunnel's rate (this invocation's 1-gateway median), and the
    CPU seconds per gigabit of payload; with both cables, WireGuard's against VXLAN's."""
    print(f"\nscaling, {'WAN ' + rate + ' per gateway' if rate else 'WAN unshaped'}: the median against N x one"
          f" tunnel's rate (the 1-gateway median of the same cable, this invocation; goal >= {SCALING_GOAL} x N);"
          " CPU s per Gbit of TCP payload, medians")  # fmt: skip
    print(f"{'cable':<9} {'gateways':>8} {'median':>8} {'min..max Mbit/s':>17} {'N x 1gw':>8} {'ratio':>6} {'goal':>4}"
          f"  {'failed':>6}  {'procs':>6} {'iperf3':>6} {'wg-go':>6} {'machine':>7} {'idle':>5}"
          "  busy  health")  # fmt: skip
    ok = True
    medians: dict[tuple[Cable, int], tuple[float, float, float]] = {}  # (Mbit/s, procs s/Gbit, machine s/Gbit)
    for cable in cables:
        one = [r.total_bps / 1e6 for r in results[cable].get(1, []) if isinstance(r, Run)]
        single = statistics.median(one) if one else None
        for n in counts:
            runs = [r for r in results[cable][n] if isinstance(r, Run)]
            failed = len(results[cable][n]) - len(runs)
            if not runs:
                ok = False
                print(
                    f"{cable.value:<9} {n:>8} {'-':>8} {'-':>17} {'-':>8} {'-':>6} {'NO':>4}  {failed:>3}/{failed:<2}"
                )
                continue
            totals = [r.total_bps / 1e6 for r in runs]
            median = statistics.median(totals)
            iperf = statistics.median(r.iperf_cpu_s / r.payload_gbit for r in runs)
            wg = [x for r in runs if (x := r.net_wg_per_gbit) is not None]
            procs = statistics.median(r.iperf_cpu_s / r.payload_gbit + (r.net_wg_per_gbit or 0.0) for r in runs)
            machine = statistics.median(r.net_machine_per_gbit for r in runs)
            idle = statistics.median(r.idle_machine for r in runs)
            medians[(cable, n)] = (median, procs, machine)
            ratio = median / (n * single) if single else None
            good = ratio is not None and ratio >= SCALING_GOAL and not failed
            ok &= good
            busy = statistics.median(r.machine_busy for r in runs)
            health = sum(r.health_downs for r in runs)
            print(
                f"{cable.value:<9} {n:>8} {median:>8.1f} {min(totals):>8.1f}..{max(totals):<8.1f}"
                f" {f'{n * single:.1f}' if single else '-':>8} {f'{ratio:.3f}' if ratio else '-':>6}"
                f" {'yes' if good else 'NO':>4}  {failed:>3}/{len(results[cable][n]):<2}  {procs:>6.2f} {iperf:>6.2f}"
                f" {f'{statistics.median(wg):.2f}' if wg else '-':>6} {machine:>7.2f} {idle:>5.2f}"
                f"  {busy:>4.0%}  {health}"
                + ("  (a wireguard-go exited during a run)" if any(r.wg_restarted for r in runs) else "")
            )
    print("(N x 1gw: N x the 1-gateway median of the same cable, '-' without 1 in --gateways; procs: CPU seconds of")
    print(" iperf3 (getrusage of the children) + wireguard-go (/proc/<pid>/stat of the lab's, both clusters) per")
    print(
        f" gigabit of payload, wireguard-go's less what it used while the lab idled {IDLE_SECONDS:g} s before the run;"
    )
    print(" the kernel's forwarding and VXLAN work runs mostly in softirq and is counted there only in part; the")
    print(" machine column (/proc/stat busy time) counts all of it, less the idle lab's (idle: busy cores then: the")
    print(" daemons' probes and other users' load, which changes; a run that keeps the machine 100 % busy squeezes")
    print(" that share too, so its net figure is low); per-Gbit figures grow at low rates (fixed costs),")
    print(" compare cables at the same rate; busy: the machine's median busy share during the runs; health: peers the")
    print(" route agents declared down, all runs)")
    if Cable.VXLAN in cables and Cable.WIREGUARD in cables:
        for n in counts:
            v, w = medians.get((Cable.VXLAN, n)), medians.get((Cable.WIREGUARD, n))
            if v and w:
                print(f"wireguard / vxlan at {n} gateway(s): throughput {w[0] / v[0]:.3f}, CPU s per Gbit: processes"
                      f" {w[1] / v[1]:.2f}x, machine {w[2] / v[2]:.2f}x")  # fmt: skip
    return ok


def _summary(
    rate: str,
    counts: Sequence[int],
    results: dict[int, list[Run | RunFailed]],
    control: Sequence[Run | RunFailed],
    cable: Cable = Cable.VXLAN,
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
    if cable is Cable.WIREGUARD:
        print(
            " wan-use: the median as WAN bytes (payload + TCP/IP + VXLAN + WireGuard headers, tc's count) / (N x rate):"
        )
        print(" the payload is at most (MTU - 52) / (MTU + 64 + 60) of the WAN bytes, 0.884 at the tunnel MTU 1390;")
    else:
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
