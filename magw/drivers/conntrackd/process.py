"""conntrackd as a process of ours, and the primary-backup transitions driven by keepalived's events.

Command line (docs/egress-ha.md; scripts/setup.sh's evidence points here)::

    ip netns exec NS conntrackd -C DIR/conntrackd.conf        # the daemon, in the foreground
    ip netns exec NS conntrackd -C DIR/conntrackd.conf -c     # a client command to it (-c -f -R -B -n)

Without ``-d`` conntrackd stays in the foreground, so the PID we hold is the daemon's. Client commands
reach it over the UNIX socket named in the config (a path in DIR), so they need not run in the namespace;
they do anyway, the same command line for both.

Transitions, as conntrackd's ``primary-backup.sh``:

- MASTER: ``-c`` commit the external cache (the flows the old master synced) to the kernel table, ``-f``
  flush both caches, ``-R`` resync the internal cache with the kernel, ``-B`` bulk-send it to the backups.
- BACKUP: ``-n`` ask the master for a resync.
- FAULT: nothing.

Not ``-t`` on BACKUP and FAULT, as ``primary-backup.sh`` does: in conntrackd 1.4.7 it schedules, after
``PurgeTimeout`` (60 s), a flush of every kernel entry that its filter lets through. The filter keeps out only the
VIPs, the nodes and the inter-cluster flows, so on a candidate that runs pods or is a gateway the flush took every
other NATed flow of the node (a pod's Service connections among them), 60 s after each start as backup too. The
agent deletes the VIPs' own entries itself instead, 60 s after the node became master of none
(``magw.drivers.conntrackd.purge``; docs/egress-ha.md, "Transitions").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address
from pathlib import Path

from magw.drivers.conntrackd.purge import purge_nat_through
from magw.drivers.conntrackd.step import Step, run_step
from magw.drivers.nsdaemon import DaemonError, NsDaemon, wait_for

BINARY = "conntrackd"
START_TIMEOUT = 10.0
CLIENT_TIMEOUT = 10.0
ON_MASTER = ("-c", "-f", "-R", "-B")
ON_BACKUP = ("-n",)
ON_FAULT: tuple[str, ...] = ()


class Conntrackd:
    """One conntrackd of ours; ``workdir`` is private to it (the config path is its ownership mark)."""

    def __init__(self, workdir: Path, netns: str | None, *, binary: str = BINARY) -> None:
        self.workdir = workdir
        self.netns = netns
        self.binary = binary
        self.conf = workdir / "conntrackd.conf"
        self.socket = workdir / "conntrackd.ctl"
        self.lock_file = workdir / "conntrackd.lock"
        self.log = workdir / "conntrackd.log"
        self.console = workdir / "conntrackd.out"
        self.daemon = NsDaemon(
            argv=[binary, "-C", str(self.conf)], netns=netns, log=self.console, marker=str(self.conf), pid_file=None
        )

    @property
    def command(self) -> list[str]:
        return self.daemon.command

    @property
    def pid(self) -> int | None:
        return self.daemon.pid

    def running(self) -> bool:
        return self.daemon.running()

    def start(self, text: str) -> int:
        """Write the config and start; wait (bounded) until its control socket answers."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.running():
            raise DaemonError(f"conntrackd ({self.conf}) already runs; stop it before a new config")
        self.conf.write_text(text)
        if self.lock_file.exists():  # only ours: the path is in our private directory
            self.lock_file.unlink()
        pid = self.daemon.start()

        def ready() -> bool:
            if self.daemon.exited() is not None:
                raise DaemonError(f"conntrackd exited with {self.daemon.exited()}; see {self.console}")
            return self.socket.exists() and self.client("-s").returncode == 0

        wait_for(ready, START_TIMEOUT, f"conntrackd's socket {self.socket}")
        return pid

    def stop(self) -> None:
        self.daemon.stop()

    def client(self, *options: str) -> Step:
        """Run ``conntrackd -C CONF OPTIONS`` against our daemon (bounded)."""
        return run_step(" ".join(options), [self.binary, "-C", str(self.conf), *options], self.netns, CLIENT_TIMEOUT)

    def steps(self, options: Sequence[str]) -> tuple[Step, ...]:
        return tuple(self.client(o) for o in options)

    def become_master(self) -> tuple[Step, ...]:
        return self.steps(ON_MASTER)

    def become_backup(self) -> tuple[Step, ...]:
        return self.steps(ON_BACKUP)

    def become_fault(self) -> tuple[Step, ...]:
        return self.steps(ON_FAULT)

    def purge(self, vips: Iterable[IPv4Address]) -> tuple[Step, ...]:
        """Delete the kernel's entries NATed through ``vips`` in our namespace (``magw.drivers.conntrackd.purge``)."""
        return purge_nat_through(vips, self.netns)
