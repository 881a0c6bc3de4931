"""Run a command as a new process and measure its wall time and its own peak RSS.

``ru_maxrss`` of a child read with ``wait4`` is NOT its own peak when the parent is large: the kernel
records the high-water mark of the memory the process had before ``exec`` as well (``exec_mmap`` keeps the
old mm's ``hiwater_rss`` in the signal struct's ``maxrss``), and Python's ``subprocess`` starts children with
``vfork``, whose memory before the ``exec`` is the parent's. A Python process holding 300 MB read 300 MB for
``/bin/true`` started this way (measured 2026-11-24; docs/performance.md, item 31, says which earlier figures
it touched).

So the command is started by a small helper process (a bare interpreter, about 10 MB) that forks and execs
it: the command's ``ru_maxrss`` is then at least the helper's size and otherwise its own peak. The helper
writes the figures to a file given to it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

HELPER = """
import json, os, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(out, "w") as f:
    json.dump({"wall": wall, "maxrss_kb": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}, f)
"""


@attrs.frozen(kw_only=True)
class Measured:
    code: int  # the command's exit code
    wall: float  # seconds from the helper's fork to the command's exit
    rss_mb: float  # the command's own peak RSS (ru_maxrss), MiB


def run_measured(
    cmd: Sequence[str],
    *,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
) -> Measured:
    """Run ``cmd`` through the helper (in ``cwd``, with ``env``); its stdout and stderr go where given.

    The helper's own CPU time (a bare interpreter, about 20 ms) counts in the caller's children times with the
    command's.
    """
    with tempfile.NamedTemporaryFile("r", suffix=".json") as result:
        subprocess.run(
            [sys.executable, "-c", HELPER, result.name, *cmd],
            stdout=stdout,
            stderr=stderr,
            env=env,
            cwd=cwd,
            timeout=timeout,
            check=True,
        )
        figures = json.load(result)
    return Measured(code=figures["code"], wall=figures["wall"], rss_mb=figures["maxrss_kb"] / 1024)
