"""A daemon we start in a network namespace, stop by its PID, and never confuse with one we did not start.

keepalived and conntrackd (docs/egress-ha.md) run without systemd: ``ip netns exec NS BINARY ...`` in the
foreground (so the PID we get from ``Popen`` is the daemon's own; ``ip netns exec`` execs it), their
files in a private directory. Ownership is the command line: a daemon is ours when ``/proc/PID/cmdline``
names our private config path. A PID file that names a live process that is not ours makes ``start``
refuse in one line; we never signal such a process. A live process that is ours (left by an agent that
restarted) is adopted instead of started twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

STOP_TIMEOUT = 10.0
POLL = 0.02


class DaemonError(RuntimeError):
    """A daemon could not be started or is not ours (one line: which, and why)."""


def read_pid(path: Path) -> int | None:
    """The PID in ``path``, or None when the file is missing, empty or not a number."""
    try:
        text = path.read_text().strip()
    except (FileNotFoundError, PermissionError):
        return None
    return int(text) if text.isdigit() else None


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def cmdline(pid: int) -> tuple[str, ...]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return ()
    return tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)


def owned_by(pid: int, marker: str) -> bool:
    """``pid`` is a live process whose command line has ``marker`` (our private config path) as an argument."""
    return alive(pid) and marker in cmdline(pid)


class NsDaemon:
    """One daemon process: ``argv`` run in ``netns`` (None: the current namespace), output to ``log``.

    ``marker`` is an argument only our instance has (its config path); ``pid_file`` is where the daemon
    writes its PID, checked before starting.
    """

    def __init__(self, *, argv: list[str], netns: str | None, log: Path, marker: str, pid_file: Path | None) -> None:
        self.argv = argv
        self.netns = netns
        self.log = log
        self.marker = marker
        self.pid_file = pid_file
        self._child: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None

    @property
    def command(self) -> list[str]:
        """The command line we run (also quoted in docs/egress-ha.md and scripts/setup.sh's evidence)."""
        return ["ip", "netns", "exec", self.netns, *self.argv] if self.netns else list(self.argv)

    @property
    def pid(self) -> int | None:
        return self._pid

    def running(self) -> bool:
        if self._child is not None and self._child.poll() is not None:
            return False
        return self._pid is not None and owned_by(self._pid, self.marker)

    def start(self) -> int:
        """Start it (or adopt our own live instance); refuse when the PID file names a process not ours."""
        if self.running():
            assert self._pid is not None
            return self._pid
        if self.pid_file is not None:
            old = read_pid(self.pid_file)
            if old is not None and alive(old):
                if not owned_by(old, self.marker):
                    raise DaemonError(
                        f"{self.pid_file} names PID {old} ({' '.join(cmdline(old))[:80]!r}), which is not ours "
                        f"(no {self.marker} in its command line); refusing to start or signal it"
                    )
                self._pid = old
                return old
        with open(self.log, "ab") as out:
            self._child = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._pid = self._child.pid
        return self._pid

    def adopt(self, pid: int) -> None:
        """Take ``pid`` as our daemon (to stop it), if its command line carries our marker; else refuse."""
        if not owned_by(pid, self.marker):
            raise DaemonError(f"PID {pid} is not ours (no {self.marker} in its command line); refusing to adopt it")
        self._child = None
        self._pid = pid

    def signal(self, sig: int) -> None:
        """Send ``sig`` to our daemon; a daemon that is not running (or not ours) raises DaemonError."""
        if not self.running() or self._pid is None:
            raise DaemonError(f"{self.argv[0]} ({self.marker}) is not running")
        os.kill(self._pid, sig)

    def exited(self) -> int | None:
        """Exit status of a daemon we started that has exited, else None."""
        return None if self._child is None else self._child.poll()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; only our own PID, and reap it."""
        pid = self._pid
        if pid is None:
            return
        if owned_by(pid, self.marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while owned_by(pid, self.marker) and time.monotonic() < deadline:
                if self._child is not None and self._child.poll() is not None:
                    break
                time.sleep(POLL)
            if owned_by(pid, self.marker):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self._child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(timeout)
        self._child = None
        self._pid = None


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate()`` until true or raise DaemonError after ``timeout`` seconds (bounded)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise DaemonError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL)
