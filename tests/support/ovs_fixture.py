"""A real Open vSwitch per test: an ``ovsdb-server`` with the vswitch schema in a temp dir, and ``ovs-vswitchd``
running inside the test's network namespace with the userspace datapath (``datapath_type=netdev``: the kernel
has no openvswitch module here; netdev needs only /dev/net/tun).

Everything listens on unix sockets in the temp dir (``OVS_RUNDIR``/``OVS_DBDIR``/``OVS_LOGDIR`` point there, or
vswitchd would look for ``br-*.mgmt`` sockets in /var/run/openvswitch) and is stopped by PID at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from magw.lab.planes.ovn_nodes import VSWITCH_SCHEMA, ovs_missing
from tests.support.ovn_fixture import _read_pid, _stop

__all__ = ["VSWITCH_SCHEMA", "Ovs", "ovs_env", "ovs_in_netns", "ovs_missing"]

CMD_TIMEOUT = 30


@attrs.frozen
class Ovs:
    dir: Path
    db: str  # unix:PATH
    ns: str
    pids: tuple[int, ...]

    def vsctl(self, *args: str) -> str:
        """``ovs-vsctl`` against this database: the tests' independent view (not our driver)."""
        return subprocess.run(
            ["ovs-vsctl", f"--db={self.db}", "--timeout=10", *args],
            check=True,
            capture_output=True,
            text=True,
            env=ovs_env(self.dir),
            timeout=CMD_TIMEOUT,
        ).stdout.strip()


def ovs_env(d: Path) -> dict[str, str]:
    return {**os.environ, "OVS_RUNDIR": str(d), "OVS_DBDIR": str(d), "OVS_LOGDIR": str(d)}


@contextmanager
def ovs_in_netns(ns: str) -> Iterator[Ovs]:
    """ovsdb-server (in the test's process namespace, on a unix socket) and ovs-vswitchd inside ``ns``."""
    d = Path(tempfile.mkdtemp(prefix="magwovs-"))  # short: unix socket paths are limited to 107 bytes
    env = ovs_env(d)
    pids: list[int] = []
    try:
        subprocess.run(
            ["ovsdb-tool", "create", str(d / "conf.db"), VSWITCH_SCHEMA], check=True, env=env, timeout=CMD_TIMEOUT
        )
        subprocess.run(
            [
                "ovsdb-server",
                str(d / "conf.db"),
                f"--remote=punix:{d}/db.sock",
                f"--pidfile={d}/db.pid",
                f"--unixctl={d}/db.ctl",
                f"--log-file={d}/db.log",
                "-vconsole:off",
                "--detach",
            ],
            check=True,
            env=env,
            timeout=CMD_TIMEOUT,
        )
        pids.append(_read_pid(d / "db.pid", time.monotonic() + 10))
        db = f"unix:{d}/db.sock"
        subprocess.run(["ovs-vsctl", f"--db={db}", "--no-wait", "init"], check=True, env=env, timeout=CMD_TIMEOUT)
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                ns,
                "ovs-vswitchd",
                db,
                f"--pidfile={d}/vswitchd.pid",
                f"--unixctl={d}/vswitchd.ctl",
                f"--log-file={d}/vswitchd.log",
                "-vconsole:off",
                "--detach",
            ],
            check=True,
            env=env,
            timeout=CMD_TIMEOUT,
        )
        pids.append(_read_pid(d / "vswitchd.pid", time.monotonic() + 10))
        yield Ovs(dir=d, db=db, ns=ns, pids=tuple(pids))
    finally:
        for pid in reversed(pids):
            _stop(pid)
        shutil.rmtree(d, ignore_errors=True)
