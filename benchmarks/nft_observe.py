"""Benchmark: observing a 100k-element nft table, libnftables' listing against our terse listing plus dumps.

Run as root: ``.venv/bin/python benchmarks/nft_observe.py [--elements 100000] [--repeat 3]``.

One fresh namespace holds table ``ip magw`` as a Globalnet gateway and a 100k-route node hold it at once: an
interval set of ``--elements`` /24 prefixes, a map of as many pod -> global IP pairs, a small set, one rule.
Each way of observing (``NftDriver(raw_elements=False)``: ``nft -j list table`` parsed by ``codec``; the default
``NftDriver``: ``rawobserve``) runs in a child process of its own, so its peak RSS is its own, and reads the
table ``--repeat`` times while a thread beside it sleeps 1 ms in a loop and records the longest time it waited
beyond that: how long the observe kept the GIL from another thread (what an event waits behind an audit).
Printed per way: the time of each read (best, median), peak RSS, the longest stall; then the ratios. Both
ways must read the same table (checked). The namespace is deleted in ``finally``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from magw.drivers.nft import NftDriver  # after sys.path

TIMEOUT = 900


def _dotted(value: int) -> str:
    return ".".join(str(value >> shift & 255) for shift in (24, 16, 8, 0))


def _table_text(count: int) -> str:
    lines = [
        "add table ip magw",
        "add chain ip magw post { type nat hook postrouting priority 100; policy accept; }",
        "add set ip magw cidrs { type ipv4_addr; flags interval; }",
        "add set ip magw nodes { type ipv4_addr; elements = { 172.18.0.3, 172.18.0.6 }; }",
        "add map ip magw gn { type ipv4_addr : ipv4_addr; }",
        "add rule ip magw post ip saddr @nodes ip daddr @cidrs accept",
    ]
    for lo in range(0, count, 10_000):
        chunk = range(lo, min(count, lo + 10_000))
        prefixes = ", ".join(f"{_dotted((11 << 24) + (i << 8))}/24" for i in chunk)
        pairs = ", ".join(f"{_dotted((10 << 24) + i)} : {_dotted((242 << 24) + i)}" for i in chunk)
        lines += [f"add element ip magw cidrs {{ {prefixes} }}", f"add element ip magw gn {{ {pairs} }}"]
    return "\n".join(lines) + "\n"


def child(ns: str, way: str, repeat: int, out: str) -> None:
    """One way of observing, ``repeat`` reads, with the stall watcher beside it; figures written to ``out``."""
    stop = threading.Event()
    worst = [0.0]

    def watch() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            time.sleep(0.001)
            worst[0] = max(worst[0], time.perf_counter() - t0 - 0.001)

    with NftDriver(ns, raw_elements=way == "raw") as driver:
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            table = driver.observe()
            times.append(time.perf_counter() - t0)
        stop.set()
        watcher.join()
    assert table is not None
    shape = {
        "sets": {s.name: len(s.elements) for s in table.sets},
        "maps": {m.name: len(m.elements) for m in table.maps},
    }
    digest = hashlib.sha256(repr((table.sets, table.maps, table.rules)).encode()).hexdigest()
    Path(out).write_text(json.dumps({
        "times": times, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "stall_ms": worst[0] * 1000, "shape": shape, "digest": digest,
    }))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, default=100_000, help="prefixes in the set and pairs in the map")
    p.add_argument("--repeat", type=int, default=3, help="reads per way, 1..20")
    p.add_argument("--child", nargs=4, metavar=("NS", "WAY", "REPEAT", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        ns, way, repeat, out = args.child
        child(ns, way, int(repeat), out)
        return 0
    if not 1 <= args.repeat <= 20 or not 1_000 <= args.elements <= 1_000_000:
        p.error("--repeat: 1..20, --elements: 1000..1000000")
    if os.geteuid() != 0:
        print("nft_observe: needs root (network namespaces)", file=sys.stderr)
        return 2
    ns = f"magwb-obs-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=_table_text(args.elements), text=True,
                       check=True, timeout=TIMEOUT)
        print(json.dumps({"load": os.getloadavg()}))
        figures = {}
        for way in ("listing", "raw"):
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                cmd = [sys.executable, __file__, "--child", ns, way, str(args.repeat), out.name]
                subprocess.run(cmd, check=True, timeout=TIMEOUT)
                figures[way] = json.loads(Path(out.name).read_text())
        for way, f in figures.items():
            times = sorted(f["times"])
            print(f"{way:8} read best {times[0]:.2f} s, median {times[len(times) // 2]:.2f} s; peak RSS "
                  f"{f['rss_mb']:.0f} MB; longest stall of the thread beside {f['stall_ms']:.0f} ms; {f['shape']}")
        if figures["listing"]["digest"] != figures["raw"]["digest"]:
            print("the two reads differ", file=sys.stderr)
            return 1
        lst, raw = figures["listing"], figures["raw"]
        print(f"raw / listing: time {sorted(raw['times'])[0] / sorted(lst['times'])[0]:.2f}x (best), "
              f"RSS {raw['rss_mb'] / lst['rss_mb']:.2f}x, stall {raw['stall_ms'] / max(lst['stall_ms'], 1e-3):.2f}x")
        print(json.dumps({"load": os.getloadavg()}))
        return 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=60)


if __name__ == "__main__":
    sys.exit(main())
