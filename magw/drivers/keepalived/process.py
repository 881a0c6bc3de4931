"""keepalived as a process of ours: in a network namespace, files in a private directory, stopped by PID.

Command line (docs/egress-ha.md; scripts/setup.sh's evidence points here)::

    ip netns exec NS keepalived -n -l -G -D -P -f DIR/keepalived.conf -p DIR/keepalived.pid \\
        -r DIR/vrrp.pid

``-n`` foreground (the PID we hold is keepalived's parent, which stops its VRRP child), ``-l`` log to
stdout (DIR/keepalived.log), ``-G`` no syslog (several of these run on one host), ``-D`` detailed, ``-P``
VRRP only. keepalived 2.2.7 writes nothing else outside DIR (checked: no /run/keepalived). A config
change is written atomically and signalled with SIGHUP (keepalived keeps its state across a reload and
re-reads the file); an unchanged config is not signalled.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Literal

from magw.drivers.keepalived.events import make_fifo
from magw.drivers.nsdaemon import DaemonError, NsDaemon, alive, owned_by, read_pid, wait_for

BINARY = "keepalived"
START_TIMEOUT = 10.0
Applied = Literal["started", "reloaded", "unchanged"]


class Keepalived:
    """One keepalived of ours. ``workdir`` is private to it (the config path is its ownership mark)."""

    def __init__(self, workdir: Path, netns: str | None, *, binary: str = BINARY) -> None:
        self.workdir = workdir
        self.conf = workdir / "keepalived.conf"
        self.pid_file = workdir / "keepalived.pid"
        self.vrrp_pid_file = workdir / "vrrp.pid"
        self.fifo = workdir / "notify.fifo"
        self.log = workdir / "keepalived.log"
        argv = [binary, "-n", "-l", "-G", "-D", "-P", "-f", str(self.conf), "-p", str(self.pid_file)]
        argv += ["-r", str(self.vrrp_pid_file)]
        self.daemon = NsDaemon(argv=argv, netns=netns, log=self.log, marker=str(self.conf), pid_file=self.pid_file)

    @property
    def command(self) -> list[str]:
        return self.daemon.command

    @property
    def pid(self) -> int | None:
        return self.daemon.pid

    def running(self) -> bool:
        return self.daemon.running()

    def _write(self, text: str) -> bool:
        try:
            if self.conf.read_text() == text:
                return False
        except FileNotFoundError:
            pass
        tmp = self.conf.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.conf)
        return True

    def apply(self, text: str) -> Applied:
        """Make keepalived run ``text``: start it, reload it (SIGHUP) when the text changed, or do nothing."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        make_fifo(str(self.fifo))
        changed = self._write(text)
        if not self.running():
            self.start()
            return "started"
        if changed:
            self.daemon.signal(signal.SIGHUP)
            return "reloaded"
        return "unchanged"

    def _reap_orphan(self) -> None:
        """A VRRP child of ours left behind by a parent that died without stopping it (SIGKILL, OOM): it keeps
        sending adverts and holding VIPs, and a new keepalived refuses to start beside it ("daemon is already
        running"; found by the soak). Stopped by PID, only when its command line carries our config path."""
        child = read_pid(self.vrrp_pid_file)
        parent = read_pid(self.pid_file)
        if child is None or not alive(child) or not owned_by(child, str(self.conf)):
            return
        if parent is not None and alive(parent) and owned_by(parent, str(self.conf)):
            return  # the parent lives: start() adopts it with its child
        orphan = NsDaemon(argv=[], netns=None, log=self.log, marker=str(self.conf), pid_file=None)
        orphan.adopt(child)
        orphan.stop()

    def start(self) -> int:
        """Start (or adopt ours) and wait until its VRRP child has written its PID file (bounded)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        make_fifo(str(self.fifo))
        self._reap_orphan()
        pid = self.daemon.start()

        def ready() -> bool:
            if self.daemon.exited() is not None:
                raise DaemonError(f"keepalived exited with {self.daemon.exited()}; see {self.log}")
            return read_pid(self.pid_file) == pid and read_pid(self.vrrp_pid_file) is not None

        wait_for(ready, START_TIMEOUT, f"keepalived's PID files in {self.workdir}")
        return pid

    def stop(self) -> None:
        """SIGTERM (keepalived then sends priority 0, so a backup takes over at once), wait, reap."""
        self.daemon.stop()
