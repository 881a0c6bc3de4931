"""Benchmark: what probing costs a gateway node with many remote gateways, per probe set, side by side.

Usage (root): ``.venv/bin/python benchmarks/probe_cost.py [--remote-gateways 100] [--seconds 10]
[--set 0.1,0.03,0.02 --set 0.03,0.02,0.02,0 ...]``

The local gateway ``gw1`` of ``benchmarks/bigsnap.py``'s snapshot (remote clusters with two gateways each: half as
many clusters as ``--remote-gateways``) runs magw's real ``HealthMonitor`` in a network namespace made here, with
its real ping sockets and its real liveness set (libnftables). Every remote gateway's VTEP address is on that
namespace's loopback, so the kernel answers each probe at once: what is measured is the prober's own cost, not a
path's. For each ``--set`` (interval, fast interval, timeout in seconds, and optionally the budget in probes per
second: the route agent's ``--probe-budget``, default 1000, 0: none) it runs ``--seconds`` and prints the interval
the monitor probes at (``every``: the budget's, between the 30 ms min interval and the interval), the
probes sent and replies read per second, and the CPU time the whole process used (the event loop and the
liveness thread), as a share of one core and per probe. Every figure comes from this run; the sets run one after
the other in the same namespace, so the machine's load is the same for all of them. The namespace is removed in
``finally``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
import uuid
from ipaddress import IPv4Address
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bigsnap import snapshot_text  # after sys.path
from magw.health.monitor import HealthMonitor  # after sys.path
from magw.health.params import LivenessParams, ProbeParams  # after sys.path
from magw.health.probe import EchoSocket, Reply, enable_ping_sockets  # after sys.path
from magw.snapshot.load import parse_snapshot_text  # after sys.path
from magw.util.logsetup import configure_logging  # after sys.path


class CountingSocket:
    """An ``EchoSocket`` that counts what goes through it."""

    def __init__(self, inner: EchoSocket, counts: dict[str, int]) -> None:
        self.inner, self.counts = inner, counts

    def fileno(self) -> int:
        return self.inner.fileno()

    def close(self) -> None:
        self.inner.close()

    def send(self, address: IPv4Address, seq: int) -> bool:
        self.counts["sent"] += 1
        return self.inner.send(address, seq)

    def replies(self) -> list[Reply]:
        got = self.inner.replies()
        self.counts["replies"] += len(got)
        return got


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(ns: str, params: ProbeParams, seconds: float, text: str) -> dict[str, Any]:
    counts = {"sent": 0, "replies": 0}
    mon = HealthMonitor(
        "gw1",
        probe=params,
        liveness=LivenessParams(exit_hold=0.0),
        netns=ns,
        sockets=lambda echo_id: CountingSocket(EchoSocket(echo_id, netns=ns), counts),  # type: ignore[arg-type,return-value]
    )
    mon.update(parse_snapshot_text(text))
    mon.synced(True)
    stop = asyncio.Event()
    task = asyncio.create_task(mon.run(stop))
    await asyncio.sleep(1.0)  # warm up: the first probes, the liveness table
    sent0, replies0, cpu0, t0 = counts["sent"], counts["replies"], _cpu(), time.monotonic()
    await asyncio.sleep(seconds)
    sent, replies = counts["sent"] - sent0, counts["replies"] - replies0
    cpu, wall = _cpu() - cpu0, time.monotonic() - t0
    stop.set()
    await asyncio.wait_for(task, 10)
    targets = len(mon.plan.targets)
    return {
        "interval": params.interval,
        "fast_interval": params.fast_interval,
        "timeout": params.timeout,
        "budget": params.budget,
        "every": mon.interval,
        "targets": targets,
        "probes_per_s": round(sent / wall, 1),
        "replies_per_s": round(replies / wall, 1),
        "cpu_share": round(cpu / wall, 4),
        "cpu_us_per_probe": round(cpu / max(sent, 1) * 1e6, 1),
        "down": sorted(mon.health.down),
    }


def _vteps(text: str) -> list[str]:
    """The remote gateways' VTEP addresses the monitor probes (from its own plan)."""
    mon = HealthMonitor("gw1", probe=ProbeParams(), liveness=LivenessParams(), sockets=lambda _i: None)  # type: ignore[arg-type,return-value]
    mon.update(parse_snapshot_text(text))
    return [str(t.address) for t in mon.plan.targets]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--remote-gateways", type=int, default=100, help="remote gateways (two per cluster; default 100)")
    p.add_argument("--seconds", type=float, default=10.0, help="seconds measured per set (default 10)")
    p.add_argument("--set", action="append", metavar="I,F,T[,B]",
                   help="interval,fast interval,timeout[,budget] (repeatable)")  # fmt: skip
    args = p.parse_args()
    if os.geteuid() != 0:
        p.error("needs root (a network namespace)")
    if not 2 <= args.remote_gateways <= 2000 or args.remote_gateways % 2:
        p.error("--remote-gateways: an even number from 2 to 2000")
    if not 1 <= args.seconds <= 120:
        p.error("--seconds: 1..120")
    try:
        keys = ("interval", "fast_interval", "timeout", "budget")
        if any(not 3 <= len(s.split(",")) <= 4 for s in args.set or ()):
            raise ValueError("each is I,F,T or I,F,T,B")
        sets = [ProbeParams(**dict(zip(keys, map(float, s.split(",")), strict=False)))
                for s in (args.set or ["0.1,0.02,0.02"])]  # fmt: skip
    except ValueError as exc:
        p.error(f"--set: {exc}")
    configure_logging("console", "warning")
    clusters = args.remote_gateways // 2
    text = snapshot_text(clusters, clusters)
    ns = f"magwpc-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        batch = "".join(f"address add {a}/32 dev lo\n" for a in _vteps(text))
        subprocess.run(["ip", "-n", ns, "-batch", "-"], input=batch, text=True, check=True)
        enable_ping_sockets(ns)
        print(f"{args.remote_gateways} remote gateways ({clusters} clusters), {args.seconds:g} s per set, "
              f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        print(f"{'interval':>8} {'fast':>6} {'timeout':>7} {'budget':>6} {'every':>6} {'probes/s':>9} "
              f"{'replies/s':>9} {'CPU':>7} {'us/probe':>8} {'down':>5}")  # fmt: skip
        for params in sets:
            r = asyncio.run(measure(ns, params, args.seconds, text))
            print(f"{r['interval']:>8g} {r['fast_interval']:>6g} {r['timeout']:>7g} {r['budget']:>6g} "
                  f"{r['every']:>6.3f} {r['probes_per_s']:>9.0f} "
                  f"{r['replies_per_s']:>9.0f} {r['cpu_share']:>7.1%} {r['cpu_us_per_probe']:>8.1f} "
                  f"{len(r['down']):>5}", flush=True)  # fmt: skip
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
