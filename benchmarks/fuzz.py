"""Coverage-guided fuzzing of magw's parsers of outside input with atheris (libFuzzer), one target per process.

    .venv/bin/python benchmarks/fuzz.py --list
    .venv/bin/python benchmarks/fuzz.py --target snapshot_yaml --seconds 60
    .venv/bin/python benchmarks/fuzz.py --all --seconds 60          # every target, one subprocess each, a table
    .venv/bin/python benchmarks/fuzz.py --target nft_json --runs 20000 --keep-corpus /tmp/nft-corpus

The targets are in tests/fuzz/targets.py (what each feeds and the one-line rule it checks), their seeds in
tests/data/fuzz/<target>/. New inputs libFuzzer finds go to a temporary directory (or --keep-corpus), never into
the seeds. A crash prints the input's path and the traceback; the process exits non-zero. docs/fuzzing.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATS = re.compile(r"#(\d+)\s+\w+.*?cov: (\d+) ft: (\d+)")
DONE = re.compile(r"Done (\d+) runs in (\d+) second")


def _run_one(target: str, seconds: int, runs: int, work: Path) -> int:
    """In this process: instrument magw, then hand the target to libFuzzer (which exits the process)."""
    import atheris

    sys.path.insert(0, str(ROOT))
    include = _instrumented(target)
    with atheris.instrument_imports(include=include):
        from tests.fuzz import targets
    if target not in targets.TARGETS:
        print(f"fuzz: unknown target {target!r} (known: {', '.join(targets.TARGETS)})", file=sys.stderr)
        return 2
    import structlog  # the parsers' warnings (an unmodelled nft object, ...) would print at every input

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    seeds = targets.CORPORA / target
    args = [sys.argv[0], str(work), str(seeds), f"-max_total_time={seconds}", "-rss_limit_mb=1024",
            "-timeout=10", "-print_final_stats=1", f"-artifact_prefix={work}/"]
    if runs:
        args.append(f"-runs={runs}")
    atheris.Setup(args, targets.TARGETS[target])
    atheris.Fuzz()
    return 0  # not reached: atheris.Fuzz() exits


def _instrumented(target: str) -> list[str]:
    """The modules to instrument for ``target`` (tests/fuzz/instrument.py); all of magw for an unknown one."""
    sys.path.insert(0, str(ROOT))
    from tests.fuzz.instrument import INSTRUMENT

    return INSTRUMENT.get(target, ["magw"])


def _targets() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tests.fuzz import targets

    return list(targets.TARGETS)


def run_subprocess(target: str, seconds: int, runs: int = 0) -> tuple[int, str]:
    """One target in a child process; (exit code, libFuzzer's output)."""
    cmd = [sys.executable, __file__, "--target", target, "--seconds", str(seconds)]
    if runs:
        cmd += ["--runs", str(runs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, cwd=ROOT, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def crash_report(output: str) -> str:
    """The part of a failed run's output that tells the crash: from libFuzzer's report of it (a deep recursion's
    traceback is long: its head and tail), or the end."""
    start = output.find("=== Uncaught Python exception")
    text = output[start:] if start >= 0 else output[-3000:]
    return text if len(text) <= 8000 else f"{text[:3000]}\n[...]\n{text[-4000:]}"


def summary(output: str) -> tuple[int, int, int]:
    """(executions, cov, ft) of the last libFuzzer status line of ``output``."""
    execs = cov = ft = 0
    for m in STATS.finditer(output):
        execs, cov, ft = int(m.group(1)), int(m.group(2)), int(m.group(3))
    done = DONE.search(output)
    if done:
        execs = int(done.group(1))
    return execs, cov, ft


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", help="one target of tests/fuzz/targets.py")
    ap.add_argument("--all", action="store_true", help="every target, one after the other, each in a subprocess")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("MAGW_FUZZ_SECONDS", "60")),
                    help="time per target (default: $MAGW_FUZZ_SECONDS or 60)")
    ap.add_argument("--runs", type=int, default=0, help="stop after this many executions (0: only --seconds)")
    ap.add_argument("--keep-corpus", type=Path, help="directory for the inputs libFuzzer adds (default: a temp dir)")
    a = ap.parse_args()
    if a.list:
        print("\n".join(_targets()))
        return 0
    if a.all:
        failed = 0
        print(f"{'target':<18} {'exit':>4} {'executions':>11} {'exec/s':>7} {'cov':>6} {'ft':>7}")
        for name in _targets():
            rc, out = run_subprocess(name, a.seconds, a.runs)
            execs, cov, ft = summary(out)
            print(f"{name:<18} {rc:>4} {execs:>11} {execs // max(a.seconds, 1):>7} {cov:>6} {ft:>7}", flush=True)
            if rc != 0:
                failed += 1
                print(crash_report(out), file=sys.stderr)
        return 1 if failed else 0
    if not a.target:
        ap.error("--target NAME, --all or --list")
    if a.keep_corpus:
        a.keep_corpus.mkdir(parents=True, exist_ok=True)
        return _run_one(a.target, a.seconds, a.runs, a.keep_corpus)
    # libFuzzer ends the process: run it in a child so that the temporary directory goes away afterwards
    with tempfile.TemporaryDirectory(prefix="magw-fuzz-") as work:
        cmd = [sys.executable, __file__, "--target", a.target, "--seconds", str(a.seconds), "--keep-corpus", work]
        if a.runs:
            cmd += ["--runs", str(a.runs)]
        return subprocess.run(cmd, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
