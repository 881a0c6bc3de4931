"""Benchmark: ``magw apply`` of two checkouts side by side, alternating, on the same snapshot (an A/B).

On a shared machine one run of a 100k-route ``magw apply`` varies by +-0.7 s, more than most changes gain;
runs of the two trees alternating in one script see the same load, and their medians show the difference.

Run as root: ``.venv/bin/python benchmarks/ab_apply.py --old DIR [--new DIR] [--routes 100000] [--runs 8]``.
``DIR`` is a checkout of this repository (``git worktree add /tmp/old REV``); ``--new`` defaults to this one.
Each run is ``python -c 'magw.cli.main.main()' apply --snapshot FILE --node gw1 --netns NS --timings`` with
``PYTHONPATH=DIR`` and ``DIR`` as its working directory (this venv's interpreter and packages, that tree's
``magw``; the script checks where a child imports ``magw`` from before it starts), into a fresh namespace
prepared as in ``end_to_end.py``. It prints each run's wall time, the process's CPU time, its peak RSS
(``benchmarks/spawn.py``) and its ``timings:`` line, then per tree the min and median of the times and the
range of the RSS. Every namespace is deleted in ``finally``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bigsnap import snapshot_text  # after sys.path
from benchmarks.bytecode import compile_tree  # after sys.path
from benchmarks.end_to_end import NODE, TIMEOUT, namespace  # after sys.path
from benchmarks.spawn import run_measured  # after sys.path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
MAIN = "import sys; from magw.cli.main import main; sys.exit(main())"


def _tree_env(tree: Path) -> dict[str, str]:
    """The environment of a child that imports ``tree``'s ``magw``: ``PYTHONPATH=tree``, and the child runs in
    ``tree``. ``python -c`` puts its working directory before ``PYTHONPATH``, so a child run in this checkout would
    import this ``magw`` whatever ``PYTHONPATH`` says (both sides of an A/B then ran the same code)."""
    return dict(os.environ, PYTHONPATH=str(tree))


def _child(tree: Path, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """This venv's Python with ``tree``'s ``magw`` first (``_tree_env``), run in ``tree``."""
    env = _tree_env(tree)
    return subprocess.run([PYTHON, *args], env=env, cwd=tree, text=True, timeout=TIMEOUT, check=False, **kwargs)


def imported_from(tree: Path) -> Path:
    """Where a child of ``_child`` imports ``magw`` from (checked against ``tree`` before any run)."""
    done = _child(tree, ["-c", "import magw; print(magw.__file__)"], capture_output=True)
    return Path(done.stdout.strip()).resolve().parent.parent


def one_run(tree: Path, snapshot: Path) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (user + system of the child), peak RSS (MiB, ``benchmarks.spawn``) and the
    ``timings:`` line of one apply."""
    with namespace() as ns, tempfile.TemporaryFile("w+") as err:
        before = os.times()
        run = run_measured(
            [PYTHON, "-c", MAIN, "apply", "--snapshot", str(snapshot), "--node", NODE, "--netns", ns, "--timings"],
            stdout=subprocess.DEVNULL, stderr=err, env=_tree_env(tree), cwd=tree,
        )  # fmt: skip
        after = os.times()
        err.seek(0)
        errors = err.read()
    if run.code != 0:
        raise SystemExit(f"{tree}: magw apply exit {run.code}: {errors.strip()[-2000:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    timings = next((line for line in errors.splitlines() if line.startswith("timings:")), "")
    return run.wall, cpu, run.rss_mb, timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="checkout A (e.g. a git worktree of an older commit)")
    parser.add_argument("--new", type=Path, default=ROOT, help="checkout B (default: this repository)")
    parser.add_argument("--routes", type=int, default=100_000, help="remote CIDRs = routes, 100..200000")
    parser.add_argument("--runs", type=int, default=8, help="runs of each tree, 1..50")
    args = parser.parse_args(argv)
    if not 100 <= args.routes <= 200_000 or not 1 <= args.runs <= 50:
        parser.error("--routes must be 100..200000 and --runs 1..50")
    for tree in (args.old, args.new):
        if not (tree / "magw" / "cli" / "main.py").is_file():
            parser.error(f"{tree}: not a checkout of magw (no magw/cli/main.py)")
    if os.geteuid() != 0:
        print("needs root (creates network namespaces)", file=sys.stderr)
        return 2
    print(f"routes {args.routes}; runs {args.runs}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    for tree in trees.values():
        print(compile_tree(tree), flush=True)
    for name, tree in trees.items():
        if imported_from(tree) != tree:
            print(f"{name}: a child would import magw from {imported_from(tree)}, not {tree}", file=sys.stderr)
            return 2
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="magw-ab-") as work:
        snapshot = Path(work) / "snapshot.yaml"
        snapshot.write_text(snapshot_text(args.routes))
        for _ in range(args.runs):
            for name, tree in trees.items():
                wall, cpu, rss, timings = one_run(tree, snapshot)
                results[name].append((wall, cpu, rss))
                print(f"{name} wall {wall:.2f} s, cpu {cpu:.2f} s, peak RSS {rss:.1f} MB; {timings}", flush=True)
    for name, runs in results.items():
        walls, cpus, rsss = [r[0] for r in runs], [r[1] for r in runs], [r[2] for r in runs]
        print(
            f"{name} ({trees[name]}): wall min {min(walls):.2f} median {statistics.median(walls):.2f} s;"
            f" cpu min {min(cpus):.2f} median {statistics.median(cpus):.2f} s;"
            f" peak RSS min {min(rsss):.1f} max {max(rsss):.1f} MB"
        )
    print(f"load at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
