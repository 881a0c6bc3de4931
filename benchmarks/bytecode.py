"""Byte-compile a checkout's ``magw`` before a benchmark times ``magw`` as a new process.

``pip install`` compiles a package's modules when it installs them, so a user's ``magw`` starts from
``__pycache__``. A development checkout is an editable install, and this machine's environment sets
``PYTHONDONTWRITEBYTECODE=1``: nothing is ever cached, and every ``magw apply`` compiled magw's modules
from source first, about 90 ms of a start-up of 0.3 s (measured 2026-11-24, docs/performance.md, item 32).
Compiling once here, with the variable left out for this one command, gives the child what an install gives
it. The ``__pycache__`` directories are git-ignored, and Python checks each against its source's mtime, so a
later edit is never run from a stale one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TIMEOUT = 300.0


def compile_tree(tree: Path) -> str:
    """``python -m compileall`` on ``tree/magw``; one line saying so (raises SystemExit if it fails)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(tree / "magw")],
        env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"compileall {tree / 'magw'}: exit {done.returncode}: {done.stdout[-2000:]}{done.stderr}")
    return f"bytecode: {tree / 'magw'} compiled, as an install does"
