"""Bounded subprocesses for ``magw gather``: one timeout each, a missing tool or a failure recorded, never raised.

The environment fixes what the tools print: ``LC_ALL=C`` (no translated messages) and ``WG_HIDE_KEYS=always``
(``wg show`` prints ``(hidden)`` for a private or preshared key, whatever the caller's environment says).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

import attrs

DEFAULT_TIMEOUT = 20.0
_ENV = {"LC_ALL": "C", "WG_HIDE_KEYS": "always"}


@attrs.frozen(kw_only=True)
class Outcome:
    """What one command did: its output, exit code (None: it never ran to the end) and why it failed, if it did."""

    argv: tuple[str, ...]
    stdout: bytes
    stderr: bytes
    code: int | None
    seconds: float
    error: str | None = None  # "missing tool: nft", "timed out after 20 s", "exit 1: <first stderr line>"

    @property
    def ok(self) -> bool:
        return self.error is None


Runner = Callable[[Sequence[str], float], Outcome]


def _first_line(data: bytes) -> str:
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def run(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> Outcome:
    """Run ``argv`` (no shell) for at most ``timeout`` seconds."""
    started = time.monotonic()
    environ = {**os.environ, **_ENV, **(env or {})}
    try:
        done = subprocess.run(list(argv), capture_output=True, timeout=timeout, check=False, env=environ)
    except FileNotFoundError:
        return Outcome(argv=tuple(argv), stdout=b"", stderr=b"", code=None, seconds=time.monotonic() - started,
                       error=f"missing tool: {argv[0]}")  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, bytes) else b""
        err = exc.stderr if isinstance(exc.stderr, bytes) else b""
        return Outcome(argv=tuple(argv), stdout=out, stderr=err, code=None, seconds=time.monotonic() - started,
                       error=f"timed out after {timeout:g} s")  # fmt: skip
    except OSError as exc:
        return Outcome(argv=tuple(argv), stdout=b"", stderr=b"", code=None, seconds=time.monotonic() - started,
                       error=f"cannot run {argv[0]}: {exc.strerror}")  # fmt: skip
    error = None
    if done.returncode != 0:
        error = f"exit {done.returncode}: {_first_line(done.stderr) or 'no message'}"
    return Outcome(argv=tuple(argv), stdout=done.stdout, stderr=done.stderr, code=done.returncode,
                   seconds=time.monotonic() - started, error=error)  # fmt: skip
