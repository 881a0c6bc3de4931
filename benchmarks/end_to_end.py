"""Benchmark: ``magw apply`` end to end, from snapshot file to kernel, against iproute2 batches.

For each size (1k, 10k, 100k routes spread over 100 remote clusters; the snapshot comes from
``benchmarks/bigsnap.py``), in fresh throwaway namespaces each prepared like a node (a veth
``cni0`` holding the gateway's CNI IP, so routes may use it as ``src``), not timed:

* **ours**: ``magw apply --snapshot FILE --node gw1 --netns NS --timings`` run as a new process,
  exactly as a user would (stdout to a file), wall time from spawn to exit, peak RSS
  (``ru_maxrss`` of that child, started by a small helper: ``benchmarks/spawn.py`` says why) and the split
  it prints (``magw.cli.timings``);
* **ip -batch**: one ``ip -batch`` file adding the same routes with what they need (the VXLAN
  links, their addresses and neighbors, the nexthops and groups, the rule): the comparison the
  targets are set against;
* **ip + bridge + nft**: everything the plan holds, as ours installs it: the same ``ip -batch``,
  plus the FDB entries by ``bridge -batch`` and the nft table (its 100k-element set too) by ``nft -f``.

The commands are generated from ``magw plan``'s text (not timed).

Run as root: ``.venv/bin/python benchmarks/end_to_end.py [--sizes 1000,10000,100000] [--repeat 1]``.
The best of ``--repeat`` runs is kept for each. Every namespace is deleted in ``finally``.
Targets (docs/performance.md): ours <= 2x ``ip -batch`` at 10k and 100k; peak RSS <= 250 MB at 100k.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bigsnap import LOCAL_CNI_IP, snapshot_text  # after sys.path
from benchmarks.bytecode import compile_tree  # after sys.path
from benchmarks.spawn import run_measured  # after sys.path
from magw.desired.node.planner import plan  # after sys.path
from magw.desired.render import render_text  # after sys.path
from magw.snapshot.load import parse_snapshot_text  # after sys.path

ROOT = Path(__file__).resolve().parent.parent
MAGW = ROOT / ".venv" / "bin" / "magw"
NODE = "gw1"
TIMEOUT = 900
MAX_ROUTES = 200_000
PROTO = 157


def sh(*cmd: str, stdin: str | None = None) -> None:
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, input=stdin, timeout=TIMEOUT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")


@contextmanager
def namespace() -> Iterator[str]:
    """A fresh namespace with lo up and ``cni0`` (a veth end), IPv6 off, holding the node's CNI IP /24."""
    name = f"magwe-{uuid.uuid4().hex[:10]}"
    sh("ip", "netns", "add", name)
    try:
        # No IPv6 in this namespace (its own sysctls): the link-local addresses the kernel gives cni0 and the
        # vxlan devices, a second after they come up, landed in node_scale's first ip-monitor windows (an
        # address and its local route each), messages that are not ours.
        sh("ip", "netns", "exec", name, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
           "net.ipv6.conf.default.disable_ipv6=1")  # fmt: skip
        setup = [
            "link set lo up",
            "link add cni0 type veth peer name cni0p",
            f"addr add {LOCAL_CNI_IP}/24 dev cni0",
            "link set cni0 up",
            "link set cni0p up",
        ]
        sh("ip", "-n", name, "-batch", "-", stdin="\n".join(setup) + "\n")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=TIMEOUT)


@attrs.frozen(kw_only=True)
class Batches:
    """iproute2/nft input for the same state as the plan."""

    ip: str  # ip -batch: links, addresses, neighbors, nexthops, groups, routes, rules
    bridge: str  # bridge -batch: FDB entries
    nft: str  # nft -f: the table


def batches(plan_text: str) -> Batches:
    """Turn ``magw plan``'s text (close to ip/bridge/nft syntax) into the commands that create it."""
    head, _, table = plan_text.partition("\ntable ")
    ip: list[str] = []
    bridge: list[str] = []
    for line in head.splitlines():
        kind = line.split(" ", 1)[0]
        if kind == "link":
            match = re.fullmatch(r"link (\S+) (type vxlan .*) mtu (\d+) address (\S+) (up|down)", line)
            if match is None:
                raise SystemExit(f"cannot translate plan line: {line}")
            name, vxlan, mtu, mac, state = match.groups()
            ip.append(f"link add {name} address {mac} mtu {mtu} {vxlan}")
            ip.append(f"link set {name} {state}")
        elif kind in ("addr", "neigh"):
            ip.append(f"{kind} add {line[len(kind) + 1 :]}")
        elif kind == "fdb":
            bridge.append(f"fdb add {line[len('fdb ') :]}")
        elif kind in ("nexthop", "route"):
            ip.append(f"{kind} add {line[len(kind) + 1 :]}" + (f" proto {PROTO}" if kind == "route" else ""))
        elif kind == "rule":
            match = re.fullmatch(r"rule (\d+): from all lookup (\S+)", line)
            if match is None:
                raise SystemExit(f"cannot translate plan line: {line}")
            ip.append(f"rule add priority {match[1]} from all lookup {match[2]}")
        elif line.strip():
            raise SystemExit(f"cannot translate plan line: {line}")
    nft = "table " + table if table else ""
    return Batches(ip="\n".join(ip) + "\n", bridge="\n".join(bridge) + "\n", nft=nft)


def _run_file(cmd: list[str], text: str) -> float:
    """Write ``text`` to a file (not timed), then time ``cmd FILE``."""
    with tempfile.NamedTemporaryFile("w", suffix=".in") as f:
        f.write(text)
        f.flush()
        started = time.perf_counter()
        sh(*cmd, f.name)
        return time.perf_counter() - started


def time_iproute2(b: Batches, *, everything: bool) -> float:
    with namespace() as ns:
        took = _run_file(["ip", "-n", ns, "-batch"], b.ip)
        if not everything:
            return took
        took += _run_file(["ip", "netns", "exec", ns, "bridge", "-batch"], b.bridge)
        if b.nft:
            took += _run_file(["ip", "netns", "exec", ns, "nft", "-f"], b.nft)
        return took


@attrs.frozen(kw_only=True)
class Ours:
    wall: float
    rss_mb: float
    timings: dict[str, float]


_TIMING = re.compile(r"(\w+) (\d+\.\d+) s")


def time_ours(snapshot: Path, routes: int) -> Ours:
    """``magw apply`` as a new process; checks the routes are in the kernel afterwards (not timed)."""
    with namespace() as ns, tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        cmd = [str(MAGW), "apply", "--snapshot", str(snapshot), "--node", NODE, "--netns", ns, "--timings"]
        run = run_measured(cmd, stdout=out, stderr=err)  # its own peak RSS, not this process's (benchmarks.spawn)
        err.seek(0)
        errors = err.read()
        if run.code != 0:
            out.seek(0)
            raise SystemExit(f"magw apply exited {run.code}: {errors[-2000:]}{out.read()[-2000:]}")
        line = next((ln for ln in errors.splitlines() if ln.startswith("timings: ")), "")
        timings = {k: float(v) for k, v in _TIMING.findall(line)}
        shown = subprocess.run(
            ["ip", "-j", "-n", ns, "route", "show", "table", "100", "proto", str(PROTO)],
            check=True,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        ).stdout
        held = len(json.loads(shown))
        if held != routes:
            raise SystemExit(f"the kernel holds {held} of our routes, expected {routes}")
        return Ours(wall=run.wall, rss_mb=run.rss_mb, timings=timings)


PHASES = ("startup", "load", "detect", "plan", "open", "observe", "diff", "apply")


def floor(repeat: int) -> str:
    """The interpreter's own share: wall time of ``python -c pass`` and of importing the command line, best of runs.

    No Python command can start faster than these; at 10k routes ``ip -batch`` takes about as long as
    the second, so the 2x target there is bounded by them (docs/performance.md).
    """
    cells = []
    for label, code in (("python -c pass", "pass"), ("import magw.cli.main", "import magw.cli.main")):
        best = float("inf")
        for _ in range(max(3, repeat)):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
            best = min(best, time.perf_counter() - start)
        cells.append(f"{label} {best:.3f} s")
    return "floor: " + ", ".join(cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="routes (remote CIDRs), comma separated")
    parser.add_argument("--remotes", type=int, default=100, help="remote clusters (default 100)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the best is kept (default 1)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not all(args.remotes <= s <= MAX_ROUTES for s in sizes):
        parser.error(f"--sizes: each must be {args.remotes}..{MAX_ROUTES}")
    if not 1 <= args.repeat <= 10:
        parser.error(f"--repeat: must be 1..10, got {args.repeat}")
    if os.geteuid() != 0:
        print("needs root (creates network namespaces)", file=sys.stderr)
        return 2
    print(f"load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    print(compile_tree(ROOT), flush=True)
    print(floor(args.repeat), flush=True)
    header = f"{'routes':>7} {'ip -batch s':>11} {'ip+br+nft s':>11} {'magw s':>8} {'ratio':>6} {'ratio all':>9}"
    header += f" {'RSS MB':>7}"
    print(header + "  split of magw (s): " + " ".join(PHASES) + " exit", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            text = snapshot_text(size, args.remotes)
            path = Path(tmp) / f"snapshot-{size}.yaml"
            path.write_text(text)
            b = batches(render_text(plan(parse_snapshot_text(text), NODE)))
            ip_routes = min(time_iproute2(b, everything=False) for _ in range(args.repeat))
            ip_all = min(time_iproute2(b, everything=True) for _ in range(args.repeat))
            runs = [time_ours(path, size) for _ in range(args.repeat)]
            ours = min(runs, key=lambda r: r.wall)
            rss = max(r.rss_mb for r in runs)
            exit_s = ours.wall - sum(ours.timings.get(p, 0.0) for p in PHASES)
            split = " ".join(f"{ours.timings.get(p, 0.0):.2f}" for p in PHASES) + f" {exit_s:.2f}"
            print(
                f"{size:>7} {ip_routes:>11.2f} {ip_all:>11.2f} {ours.wall:>8.2f} {ours.wall / ip_routes:>6.2f}"
                f" {ours.wall / ip_all:>9.2f} {rss:>7.1f}  {split}",
                flush=True,
            )
    print(f"load average at end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print("targets: ratio <= 2 at 10k and 100k routes; RSS <= 250 MB at 100k")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
