"""``benchmarks/throughput.py --cni ovn``: the plain lab and the OVN lab side by side, same topology, same runs.

Per gateway count N, back to back so that both see about the same load: the lab of ``throughput.py`` (east and
west, N gateways and 2 workers with 2 pods each, every gateway's WAN egress shaped by tbf to ``--rate``), then the
same lab with ``--cni ovn``: the pods on ``br-int`` of each node's Open vSwitch (userspace datapath), east's traffic
to west through OVN's reroute policy, one gateway router per gateway (ECMP over them by OVN's hash: iperf3's
parallel TCP streams spread by port), geneve between the chassis, then the gateway's kernel and magw's tunnels as
in the plain lab; and the same back. Each lab gets ``--repeat`` runs of iperf3 (``throughput.py``'s measurement:
the west pods' received bytes while every client sent). Printed: ``throughput.py``'s table for each lab (with a
``--rate``), then one table side by side: each lab's median and spread, OVN / plain, and the machine's busy share.

Only the VXLAN cable. The userspace datapath is functional, not fast (0.5-0.9 Gbit/s TCP on the 2-vCPU machine of
docs/performance.md): with ``--rate none`` the CPU, not the gateways, is what both labs measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Sequence

from benchmarks.throughput import CPU_BOUND, Run, RunFailed, _rate_mbit, _summary, measure


def _median(runs: Sequence[Run]) -> float:
    return statistics.median(r.total_bps / 1e6 for r in runs)


def table(counts: Sequence[int], results: dict[str, dict[int, list[Run | RunFailed]]], rate: str | None) -> bool:
    """Per N: each lab's median (min..max) Mbit/s, OVN / plain, and OVN against 0.95 x N x rate (with a rate)."""
    print(f"\nside by side, {'WAN ' + rate + ' per gateway' if rate else 'WAN unshaped'} (Mbit/s of TCP payload,"
          " medians of the runs with a figure):")  # fmt: skip
    print(f"{'gateways':>8}  {'plain':>7} {'min..max':>15}  {'ovn':>7} {'min..max':>15}  {'ovn/plain':>9}"
          f"  {'ovn/(N x rate)':>14}  {'failed p/o':>10}  {'busy p/o':>9}  {'health p/o':>10}")  # fmt: skip
    ok = True
    for n in counts:
        got = {cni: [r for r in results[cni][n] if isinstance(r, Run)] for cni in ("generic", "ovn")}
        failed = "/".join(str(len(results[c][n]) - len(got[c])) for c in ("generic", "ovn"))
        cells = []
        for cni in ("generic", "ovn"):
            runs = got[cni]
            totals = [r.total_bps / 1e6 for r in runs]
            cells.append(f"{_median(runs):>7.1f} {min(totals):>7.1f}..{max(totals):<6.1f}" if runs
                         else f"{'-':>7} {'-':>15}")  # fmt: skip
        plain, ovn = (_median(got[c]) if got[c] else None for c in ("generic", "ovn"))
        ratio = f"{ovn / plain:.3f}" if plain and ovn else "-"
        target = "-"
        if rate and ovn:
            share = ovn / (n * _rate_mbit(rate))
            target = f"{share:.3f} {'yes' if share >= 0.95 else 'NO'}"
            ok &= share >= 0.95
        ok &= bool(ovn)
        busy = "/".join(f"{statistics.median(r.machine_busy for r in got[c]):.0%}" if got[c] else "-"
                        for c in ("generic", "ovn"))  # fmt: skip
        health = "/".join(str(sum(r.health_downs for r in got[c])) for c in ("generic", "ovn"))
        print(f"{n:>8}  {cells[0]}  {cells[1]}  {ratio:>9}  {target:>14}  {failed:>10}  {busy:>9}  {health:>10}")
    print(f"(p/o: plain / ovn; busy: the machine's median busy share during the runs, all users; >= {CPU_BOUND:.0%}:")
    print(" the CPU limits the figure; health: peers the route agents declared down during the runs; ovn/(N x rate):")
    print(" against the plain table's target 0.95 (the payload is at most 0.923 of the WAN bytes, headers))")
    return ok


def side_by_side(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.cable != "vxlan":
        parser.error("--cni ovn: only with --cable vxlan")
    counts = [int(x) for x in args.gateways.split(",")]
    rate: str | None = None if args.rate == "none" else args.rate
    if rate is not None:
        _rate_mbit(rate)
    elif args.latency:
        parser.error("--latency: a tbf queue bound needs a --rate")
    print(f"nproc {os.cpu_count()}; kernel {os.uname().release}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    results: dict[str, dict[int, list[Run | RunFailed]]] = {"generic": {}, "ovn": {}}
    for n in counts:
        for cni in ("generic", "ovn"):  # back to back: about the same load
            wan = f"WAN {rate} each" if rate else "WAN unshaped"
            print(f"== {n} gateway(s) per cluster, cni {cni}, {wan}, {args.repeat} run(s)", flush=True)
            results[cni][n] = measure(args.name, n, rate, args.latency, args.duration, args.streams, args.repeat,
                                      cni=cni)  # fmt: skip
    control: dict[str, list[Run | RunFailed]] = {"generic": [], "ovn": []}
    if args.control and rate is not None:
        for cni in ("generic", "ovn"):
            print(f"== control: {max(counts)} gateway(s), cni {cni}, WAN unshaped", flush=True)
            control[cni] = measure(args.name + "c", max(counts), None, None, args.duration, args.streams, 1, cni=cni)
    if rate is not None:
        for cni in ("generic", "ovn"):
            print(f"\n-- cni {cni}")
            _summary(rate, counts, results[cni], control[cni])
    ok = table(counts, results, rate)
    print(f"load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if ok else 1
