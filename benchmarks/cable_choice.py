"""Benchmark: the two WireGuard cable designs side by side, on one machine in one run (docs/cables.md).

- ``direct``: the pod packet goes into a WireGuard device as it is, what one device per remote gateway would
  carry (60 bytes of overhead, device MTU = underlay - 60);
- ``vxlan``: the pod packet goes into VXLAN first, and the VXLAN packet into the gateway's one WireGuard device,
  as magw does (110 bytes, inner MTU = underlay - 110).

Two namespaces joined by a veth (the underlay, MTU 1500) each run magw's WireGuard driver (wireguard-go here,
the kernel's module where it exists); ``direct`` sends iperf3 TCP to the peer's inner address, ``vxlan`` to an
address on a VXLAN device whose remote is that inner address. The designs alternate, ``--repeat`` times each,
and the script prints each run's rate, the CPU seconds the WireGuard processes and iperf3 used per gigabit
carried (``/proc/<pid>/stat``: utime + stime of wireguard-go, getrusage of the iperf3 children), and the
medians with their ratio. Every namespace and process is removed in ``finally``.

Run as root: ``.venv/bin/python benchmarks/cable_choice.py [--duration 5] [--repeat 3] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from ipaddress import IPv4Address, IPv4Interface
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from magw.desired.cable.values import WgDevice, WgPeer  # after sys.path
from magw.drivers.netns import run_in_netns  # after sys.path
from magw.drivers.wireguard.device import WireGuardDriver  # after sys.path
from magw.model.cable import wg_allowed, wg_inner_ip  # after sys.path

UNDERLAY = {"a": "192.0.2.1", "b": "192.0.2.2"}
OVERLAY = {"a": "10.99.0.1", "b": "10.99.0.2"}
PORT = 51820
TICKS = os.sysconf("SC_CLK_TCK")


def sh(ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True, check=check, timeout=120)


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Pair:
    def __init__(self, tmp: Path) -> None:
        tag = uuid.uuid4().hex[:8]
        self.ns = {s: f"magwb-cc-{s}-{tag}" for s in "ab"}
        self.drivers: dict[str, WireGuardDriver] = {}
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
            sh(ns, "ip", "link", "set", "lo", "up")
        sh(self.ns["a"], "ip", "link", "add", "ul", "type", "veth", "peer", "name", "ul", "netns", self.ns["b"])
        for side, ns in self.ns.items():
            sh(ns, "ip", "addr", "add", f"{UNDERLAY[side]}/24", "dev", "ul")
            sh(ns, "ip", "link", "set", "ul", "up")
            (tmp / side).mkdir()
            self.drivers[side] = WireGuardDriver(tmp / side)

    def up(self) -> None:
        public = {s: run_in_netns(self.ns[s], lambda s=s: self.drivers[s].key()[1]) for s in "ab"}  # type: ignore[misc]
        for side, other in (("a", "b"), ("b", "a")):
            plan = WgDevice(
                name="magw-wg",
                listen_port=PORT,
                mtu=1500 - 60,
                address=IPv4Interface(f"{wg_inner_ip(IPv4Address(UNDERLAY[side]))}/8"),
                peers=(
                    WgPeer(
                        public_key=public[other],
                        owner=other,
                        endpoint=IPv4Address(UNDERLAY[other]),
                        port=PORT,
                        allowed_ips=(wg_allowed(IPv4Address(UNDERLAY[other])),),
                    ),
                ),
            )
            result = run_in_netns(self.ns[side], lambda p=plan, s=side: self.drivers[s].ensure(p))  # type: ignore[misc]
            self.backend = result.backend or "?"
            inner = str(wg_inner_ip(IPv4Address(UNDERLAY[side])))
            remote = str(wg_inner_ip(IPv4Address(UNDERLAY[other])))
            sh(self.ns[side], "ip", "link", "add", "vxt", "type", "vxlan", "id", "1000", "dstport", "4500",
               "local", inner, "remote", remote)  # fmt: skip
            sh(self.ns[side], "ip", "link", "set", "vxt", "mtu", str(1500 - 110), "up")
            sh(self.ns[side], "ip", "addr", "add", f"{OVERLAY[side]}/24", "dev", "vxt")

    backend = "?"

    def wg_pids(self) -> list[int]:
        return [d._userspace.pid for d in self.drivers.values() if d._userspace.pid is not None]

    def close(self) -> None:
        for side, ns in self.ns.items():
            try:
                run_in_netns(ns, self.drivers[side].stop)
            except Exception as exc:  # cleanup goes on: the namespaces must go
                print(f"cleanup: {side}: {exc}", file=sys.stderr)
            subprocess.run(["ip", "netns", "del", ns], check=False, timeout=30)


def run_once(pair: Pair, design: str, duration: float) -> dict[str, Any]:
    dst = OVERLAY["b"] if design == "vxlan" else str(wg_inner_ip(IPv4Address(UNDERLAY["b"])))
    server = subprocess.Popen(
        ["ip", "netns", "exec", pair.ns["b"], "iperf3", "-s", "-1", "-B", dst],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wg_before = sum(_cpu_of(p) for p in pair.wg_pids())
        child_before = _children_cpu()
        for _ in range(50):  # the server binds within a few ms; bounded
            if sh(pair.ns["b"], "ss", "-ltn", check=False).stdout.count(":5201"):
                break
            time.sleep(0.05)
        out = sh(pair.ns["a"], "iperf3", "-c", dst, "-t", f"{duration:g}", "-J", check=False)
        wg_cpu = sum(_cpu_of(p) for p in pair.wg_pids()) - wg_before
    finally:
        try:
            server.wait(timeout=10)  # -1: the server exits after its one test
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    child_cpu = _children_cpu() - child_before
    doc = json.loads(out.stdout) if out.stdout.strip() else {}
    end = doc.get("end", {})
    bps = float(end.get("sum_received", {}).get("bits_per_second", 0.0))
    seconds = float(end.get("sum_received", {}).get("seconds", duration)) or duration
    gigabits = bps * seconds / 1e9
    return {
        "design": design,
        "mbit_s": round(bps / 1e6, 1),
        "retransmits": end.get("sum_sent", {}).get("retransmits"),
        "cpu_s_per_gbit": round((wg_cpu + child_cpu) / gigabits, 2) if gigabits else None,
        "error": doc.get("error"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per iperf3 run (default 5)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per design, alternating (default 3)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("cable_choice: run as root (network namespaces)", file=sys.stderr)
        return 2
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="magw-cable-choice-") as tmp:
        pair = Pair(Path(tmp))
        try:
            pair.up()
            backend = pair.backend
            print(f"cable_choice: WireGuard backend {backend}, underlay MTU 1500, {args.repeat} x {args.duration:g} s")
            for i in range(args.repeat):
                for design in ("direct", "vxlan"):
                    r = run_once(pair, design, args.duration)
                    runs.append(r)
                    error = f"  error {r['error']}" if r["error"] else ""
                    print(f"run {i + 1} {design:6}: {r['mbit_s']:8.1f} Mbit/s  retransmits {r['retransmits']}  "
                          f"cpu {r['cpu_s_per_gbit']} s/Gbit{error}")  # fmt: skip
        finally:
            pair.close()
    med = {d: statistics.median(r["mbit_s"] for r in runs if r["design"] == d) for d in ("direct", "vxlan")}
    cpu = {
        d: statistics.median(r["cpu_s_per_gbit"] for r in runs if r["design"] == d and r["cpu_s_per_gbit"])
        for d in ("direct", "vxlan")
    }
    ratio = med["vxlan"] / med["direct"] if med["direct"] else float("nan")
    print(f"median: direct {med['direct']:.1f} Mbit/s, vxlan over wireguard {med['vxlan']:.1f} Mbit/s "
          f"(ratio {ratio:.2f}); cpu s/Gbit direct {cpu['direct']:.2f}, vxlan {cpu['vxlan']:.2f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "median_mbit_s": med, "ratio": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
