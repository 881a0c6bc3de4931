"""A bounded coverage-guided run of every target (benchmarks/fuzz.py, one atheris subprocess each).

Each target fuzzes for $MAGW_FUZZ_SECONDS seconds (default 3: the whole part stays near a minute and a half on
the 2-core CI machine, start-up included) and must end without a crash: libFuzzer exits 0 and reports how many
inputs it ran. ``benchmarks/fuzz.py --all --seconds 60`` is the longer run (docs/fuzzing.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

pytest.importorskip("atheris", reason="atheris is a test extra (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz  # noqa: E402  (benchmarks/fuzz.py)

SECONDS = int(os.environ.get("MAGW_FUZZ_SECONDS", "3"))


@pytest.mark.timeout(SECONDS + 300)
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_fuzzes_without_a_crash(name: str) -> None:
    rc, output = fuzz.run_subprocess(name, SECONDS)
    assert rc == 0, f"{name}: libFuzzer exited {rc}:\n{fuzz.crash_report(output)}"
    executions, cov, _ft = fuzz.summary(output)
    assert executions > len(list((ROOT / "tests" / "data" / "fuzz" / name).iterdir())), output[-2000:]
    assert cov > 0, f"{name}: no coverage reported (instrumentation missing?):\n{output[-2000:]}"
