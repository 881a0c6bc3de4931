"""wireguard-go, the userspace WireGuard, for kernels without the module (as on the lab machines).

wireguard-go keeps its control socket at ``/var/run/wireguard/<dev>.sock``, a path every network namespace of
the host shares: ``wg`` in one namespace would list and configure the devices of all of them, and two
namespaces could not both have a ``magw-wg``. So the driver starts it in a mount namespace of its own with a
private tmpfs on ``/run/wireguard`` (``unshare --mount --propagation private``; the directory itself is
created on the host if missing, empty), and runs ``wg`` for it through ``nsenter --mount`` into that
namespace. Each node (each gateway pod in a cluster) then sees its own device only.

wireguard-go outlives a route agent restart (its own session; a restart must move no flow) and the next agent
adopts it through the pid file in the state directory, but only after checking that the process is
wireguard-go serving our device in our network namespace. A ``magw-wg`` in this namespace that no such process
holds was not made by us: the driver refuses to touch it, in one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import structlog

from magw.drivers.unixsock import listens
from magw.drivers.wireguard.tool import WgError, WgTool

log = structlog.get_logger(__name__)

WIREGUARD_GO = "wireguard-go"
START_WAIT = 5.0
STOP_WAIT = 3.0
# The script the new mount namespace runs: its own tmpfs on /run/wireguard, then wireguard-go in the foreground
# (exec: the pid of the Popen is wireguard-go's).
_START = (
    'mkdir -p /run/wireguard && mount -t tmpfs -o mode=0700,size=1m magw-wg /run/wireguard && exec wireguard-go -f "$1"'
)


def own_netns() -> tuple[int, int]:
    st = os.stat("/proc/thread-self/ns/net")
    return (st.st_dev, st.st_ino)


def _netns_of(pid: int) -> tuple[int, int] | None:
    try:
        st = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def link_exists(name: str) -> bool:
    try:
        socket.if_nametoindex(name)
    except OSError:
        return False
    return True


def _serves(pid: int, device: str) -> bool:
    """True when ``pid`` is a wireguard-go serving ``device`` in our network namespace."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if not cmdline or os.path.basename(cmdline[0].decode(errors="replace")) != WIREGUARD_GO:
        return False
    if device.encode() not in cmdline[1:]:
        return False
    return _netns_of(pid) == own_netns()


class UserspaceDevice:
    """The wireguard-go process of one device: started, adopted after a restart, or stopped."""

    backend = "userspace"

    def __init__(self, device: str, workdir: Path) -> None:
        self.device = device
        self.pidfile = workdir / "wireguard-go.pid"
        self.logfile = workdir / "wireguard-go.log"
        self._child: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None

    def _recorded_pid(self) -> int | None:
        try:
            text = self.pidfile.read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def _reap(self) -> None:
        if self._child is not None and self._child.poll() is not None:
            log.warning(
                "wireguard.userspace_exited", device=self.device, pid=self._child.pid, code=self._child.returncode
            )
            self._child = None
            self.pid = None

    def present(self) -> bool:
        """True when our wireguard-go serves the device here (adopting the recorded one after a restart)."""
        self._reap()
        if self.pid is not None and _serves(self.pid, self.device) and link_exists(self.device):
            return True
        pid = self._recorded_pid()
        if pid is not None and _serves(pid, self.device) and link_exists(self.device):
            if self.pid != pid:
                log.info("wireguard.userspace_adopted", device=self.device, pid=pid)
            self.pid = pid
            return True
        if link_exists(self.device):
            raise WgError(
                f"{self.device}: a device of that name exists in this network namespace but no wireguard-go we "
                f"started serves it ({self.pidfile}); refusing to configure a device we did not create"
            )
        return False

    def create(self) -> None:
        """Start wireguard-go for the device and wait (bounded) until the device and its socket are there."""
        self.stop()  # a recorded process that lost its device (it exits then anyway)
        self.pidfile.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.logfile, "ab") as out:
            try:
                child = subprocess.Popen(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c", _START, "magw-wg", self.device],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # survives the agent's restart (and a signal to its process group)
                )
            except FileNotFoundError as exc:
                raise WgError(f"{exc.filename}: not found (wireguard-go needs util-linux's unshare)") from None
        self._child = child
        self.pid = child.pid
        self.pidfile.write_text(f"{child.pid}\n")
        deadline = time.monotonic() + START_WAIT
        sock = Path(f"/proc/{child.pid}/root/run/wireguard/{self.device}.sock")
        while not (link_exists(self.device) and listens(sock)):  # listening: ``wg`` gives up on a refused connect
            if child.poll() is not None:
                raise WgError(f"wireguard-go for {self.device} exited with {child.returncode} (log: {self.logfile})")
            if time.monotonic() >= deadline:
                self.stop()
                raise WgError(
                    f"wireguard-go for {self.device}: no device within {START_WAIT:g} s (log: {self.logfile})"
                )
            time.sleep(0.02)
        log.info("wireguard.userspace_started", device=self.device, pid=child.pid)

    def tool(self) -> WgTool:
        if self.pid is None:
            raise WgError(f"{self.device}: wireguard-go is not running")
        return WgTool(self.device, ("nsenter", f"--target={self.pid}", "--mount"))

    def stop(self) -> None:
        """Stop our wireguard-go (checked to be ours first); the device goes with it."""
        pid = self.pid if self.pid is not None else self._recorded_pid()
        if pid is not None and _serves(pid, self.device):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_WAIT
            while _serves(pid, self.device) and time.monotonic() < deadline:
                if self._child is not None:
                    self._child.poll()
                time.sleep(0.02)
            if _serves(pid, self.device):
                os.kill(pid, signal.SIGKILL)
            log.info("wireguard.userspace_stopped", device=self.device, pid=pid)
        if self._child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(timeout=STOP_WAIT)
        self._child = None
        self.pid = None
        self.pidfile.unlink(missing_ok=True)
