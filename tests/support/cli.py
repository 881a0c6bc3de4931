"""The magw CLI run as a user runs it, in a new process (the conftest's ``magw_cli`` fixture)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs

from tests.support.paths import REPO


@attrs.frozen
class MagwCli:
    """``magw_cli("plan", "--node", "e-w1", ...)`` runs ``python -m magw.cli.main ARGS`` from the repository's root
    and returns the finished process (text stdout and stderr); ``check=True`` raises on a non-zero exit.
    ``timeout`` is a safety bound, not a speed assertion."""

    argv: tuple[str, ...] = (sys.executable, "-m", "magw.cli.main")

    def __call__(
        self, *args: str, stdin: str | None = None, timeout: float = 120, check: bool = False, cwd: Path = REPO
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.argv, *args], input=stdin, capture_output=True, text=True, timeout=timeout, check=check, cwd=cwd
        )

    def lab(self, *args: str) -> str:
        """``magw lab ARGS``, which must succeed: its stdout."""
        return self("lab", *args, check=True).stdout
