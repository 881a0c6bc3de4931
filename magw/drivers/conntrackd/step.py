"""One command of a transition and how it went."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

import attrs


@attrs.frozen(kw_only=True)
class Step:
    """One client command and how it went (the agent logs these; a failed step does not stop the next)."""

    option: str
    returncode: int
    output: str


def run_step(option: str, argv: Sequence[str], netns: str | None, timeout: float) -> Step:
    """Run ``argv`` in ``netns`` (None: here), bounded by ``timeout``: the step named ``option``, with its exit
    status and output (-1 and "timed out" when the time ran out)."""
    cmd = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Step(option=option, returncode=-1, output="timed out")
    return Step(option=option, returncode=done.returncode, output=(done.stdout + done.stderr).strip())
