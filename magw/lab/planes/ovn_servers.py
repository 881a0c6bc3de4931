"""An OVN control plane in one directory: the NB and SB ``ovsdb-server``s and ``ovn-northd``.

Everything of one control plane lives in its directory ``d``: the databases (``nb.db``, ``sb.db``), the unix
sockets the servers listen on (``nb.sock``, ``sb.sock``: nothing listens on any network), their control
sockets, pid files and logs. The tests start the servers with ``--detach`` (``tests/support/ovn_fixture.py``); the lab
starts them in the foreground as lab processes (``magw.lab.planes.ovn``), so they are recorded and stopped by PID
like every daemon. The command lines are the same, written once here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import attrs

from magw.lab.planes.ovn_topology import CMD_TIMEOUT, tool_env

OVN_TOOLS = ("ovsdb-server", "ovsdb-tool", "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovn-trace")
NB_SCHEMA = "/usr/share/ovn/ovn-nb.ovsschema"
SB_SCHEMA = "/usr/share/ovn/ovn-sb.ovsschema"
SCHEMAS = {"nb": NB_SCHEMA, "sb": SB_SCHEMA}


def ovn_missing() -> str | None:
    """Why an OVN control plane cannot run here, or None."""
    missing = [t for t in OVN_TOOLS if shutil.which(t) is None]
    if missing:
        return f"OVN tools missing: {', '.join(missing)} (Debian ovn-central; scripts/setup.sh installs it)"
    if not all(os.path.exists(s) for s in SCHEMAS.values()):
        return f"OVN schemas missing ({NB_SCHEMA}, {SB_SCHEMA})"
    return None


@attrs.frozen
class OvnDir:
    """The files of one control plane in ``dir`` (a ``magw.lab.planes.ovn_topology.Databases``)."""

    dir: Path

    @property
    def nb(self) -> str:
        return f"unix:{self.dir / 'nb.sock'}"

    @property
    def sb(self) -> str:
        return f"unix:{self.dir / 'sb.sock'}"

    def socket(self, db: str) -> Path:
        return self.dir / f"{db}.sock"

    def pidfile(self, daemon: str) -> Path:
        return self.dir / f"{daemon}.pid"


def create_db(d: Path, db: str) -> None:
    """``ovsdb-tool create`` the empty ``nb`` or ``sb`` database in ``d``."""
    subprocess.run(
        ["ovsdb-tool", "create", str(d / f"{db}.db"), SCHEMAS[db]],
        check=True, capture_output=True, env=tool_env(d), timeout=CMD_TIMEOUT,
    )  # fmt: skip


def server_argv(d: Path, db: str) -> list[str]:
    """``ovsdb-server`` of database ``db`` (``nb``/``sb``) in ``d``: a unix socket, a pid file, a log file."""
    return [
        "ovsdb-server", "--no-chdir", f"--pidfile={d / db}.pid", f"--unixctl={d / db}.ctl",
        f"--remote=punix:{d / db}.sock", f"--log-file={d / db}.log", str(d / f"{db}.db"),
    ]  # fmt: skip


def northd_argv(d: Path) -> list[str]:
    """``ovn-northd`` between the NB and SB of ``d``."""
    return [
        "ovn-northd", "--no-chdir", f"--pidfile={d}/northd.pid", f"--unixctl={d}/northd.ctl",
        f"--ovnnb-db=unix:{d}/nb.sock", f"--ovnsb-db=unix:{d}/sb.sock", f"--log-file={d}/northd.log",
    ]  # fmt: skip
