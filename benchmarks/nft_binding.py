"""Time one 100k-element nftables transaction through Debian's binding (what magw uses) and through bare ctypes.

magw drives libnftables through Debian's python3-nftables (``magw.drivers.nft.libnft.Nft``).
Before, it had its own ctypes binding. This script runs the SAME transaction
(replace ``table ip magw_bench`` holding one ``ipv4_addr`` set of --elements
addresses) --repeat times each way (interleaved), in a throwaway namespace it creates and
removes, and prints the times:

- ``python3-nftables``: ``Nft.json_cmd`` -> ``Nftables.json_cmd`` (json.dumps,
  ``nft_run_cmd_from_buffer``, json.loads; no schema validation);
- ``bare ctypes``: ``json.dumps`` and ``nft_run_cmd_from_buffer`` on a context of
  our own, which is all the old binding did;
- ``json_validate`` (not on magw's path, printed for comparison): the binding's
  optional jsonschema check of the same document, run by Debian's own
  /usr/bin/python3 (jsonschema is not in our virtualenv); skipped if that fails.

    sudo .venv/bin/python benchmarks/nft_binding.py [--elements 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from magw.drivers.netns import in_netns
from magw.drivers.nft.libnft import SONAME, Nft

TABLE = {"family": "ip", "name": "magw_bench"}
VALIDATE = """
import json, sys, time
sys.path.insert(0, "/usr/lib/python3/dist-packages")
import nftables
doc = json.load(open(sys.argv[1]))
nft = nftables.Nftables.__new__(nftables.Nftables)  # no context needed to validate
start = time.perf_counter()
nft.json_validate(doc)
print(time.perf_counter() - start)
"""


def transaction(count: int) -> dict[str, Any]:
    """Replace the bench table: add; delete; add; a set; ``count`` addresses from 10.0.0.0 up."""
    addrs = [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(count)]
    setkey = {**TABLE, "table": TABLE["name"], "name": "s"}
    return {
        "nftables": [
            {"add": {"table": TABLE}},
            {"delete": {"table": TABLE}},
            {"add": {"table": TABLE}},
            {"add": {"set": {**setkey, "type": "ipv4_addr"}}},
            {"add": {"element": {**setkey, "elem": addrs}}},
        ]
    }


def bare_ctypes(netns: str) -> Callable[[dict[str, Any]], None]:
    """The old binding's path: our own context, made in ``netns``, and nft_run_cmd_from_buffer."""
    lib = ctypes.CDLL(SONAME)
    lib.nft_ctx_new.restype = ctypes.c_void_p
    lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
    lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    with in_netns(netns):
        ctx = lib.nft_ctx_new(0)
    lib.nft_ctx_output_set_flags(ctx, 1 << 4)  # NFT_CTX_OUTPUT_JSON
    lib.nft_ctx_buffer_output(ctx)
    lib.nft_ctx_buffer_error(ctx)

    def run(doc: dict[str, Any]) -> None:
        with in_netns(netns):
            if lib.nft_run_cmd_from_buffer(ctx, json.dumps(doc).encode()) != 0:
                raise RuntimeError("bare ctypes: the transaction failed")

    return run


def timed(fns: list[Callable[[dict[str, Any]], object]], doc: dict[str, Any], repeat: int) -> list[list[float]]:
    """Seconds per run of each of ``fns``, interleaved (a, b, a, b, ...) so that machine noise hits both alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, own in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn(doc)
            own.append(time.perf_counter() - start)
    return times


def validate_times(doc: dict[str, Any], repeat: int) -> list[float] | str:
    """json_validate under Debian's Python, or why it could not run."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(doc, f)
        f.flush()
        times = []
        for _ in range(repeat):
            proc = subprocess.run(
                ["/usr/bin/python3", "-c", VALIDATE, f.name], capture_output=True, text=True, timeout=600
            )
            if proc.returncode != 0:
                return (proc.stderr.strip().splitlines() or ["failed"])[-1]
            times.append(float(proc.stdout))
    return times


def show(name: str, times: list[float] | str) -> None:
    if isinstance(times, str):
        print(f"{name:<40} skipped: {times}")
        return
    runs = " ".join(f"{t:.3f}" for t in times)
    print(f"{name:<40} min {min(times):.3f} s  median {statistics.median(times):.3f} s  (runs: {runs})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--elements", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--skip-validate", action="store_true", help="do not time json_validate")
    args = p.parse_args(argv)
    if args.elements < 1 or args.repeat < 1:
        p.error("--elements and --repeat must be >= 1")
    doc = transaction(args.elements)
    ns = f"magwb-nft-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
    try:
        print(f"one transaction: replace table ip magw_bench with a set of {args.elements} addresses")
        with Nft(ns) as nft:
            official, bare = timed([nft.json_cmd, bare_ctypes(ns)], doc, args.repeat)
        show("python3-nftables (Nft.json_cmd)", official)
        show("bare ctypes (the old binding's path)", bare)
        if not args.skip_validate:
            show("json_validate (never called by magw)", validate_times(doc, args.repeat))
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
