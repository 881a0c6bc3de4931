"""Ending a subprocess a test started: its output once it ended, killed (by its PID) when it does not in time."""

from __future__ import annotations

import subprocess


def finish(proc: subprocess.Popen[str], timeout: float = 15.0) -> tuple[str, str]:
    """``proc``'s stdout and stderr once it ended; killed after ``timeout`` seconds."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
