"""Bad input to ``magw`` is ONE line on stderr and exit 2; a failure to reach something is one line and exit 1.

Pinned here (docs/cli.md): a missing ``--broker-dir`` of ``globalnet show`` / ``egress show`` / ``egress bind`` (once
a warning plus ``RuntimeError``, exit 1), a ``--cluster`` the broker directory has no Cluster document of (once "no
snapshot ... yet", exit 1), an ``--nb``/``--sb``/``--ovs-db`` that is no OVSDB remote (once exit 1 after trying
it), ``ovn show`` of an unreachable database (once an ovsdbapp log line first). And a dry run of ``apply`` or
``cleanup`` without ``--netns`` is not refused in the host's namespace: it only reads.

The commands run as the ``magw`` console script (its ``main`` ends with ``os._exit``); nothing here connects
anywhere but to a unix socket path under ``tmp_path`` that does not exist.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from magw.cli import UsageError, apply, cleanup, nodeargs

ROOT = Path(__file__).resolve().parents[3]
MAGW = str(Path(sys.executable).parent / "magw")
TIMEOUT = 60


def _magw(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MAGW, *argv], capture_output=True, text=True, timeout=TIMEOUT)


def _one_line(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("magw: error: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(
    "command",
    [("globalnet", "show"), ("egress", "show"), ("egress", "bind", "v1", "blog")],
    ids=lambda c: " ".join(c),
)
def test_missing_broker_dir_is_bad_input(command: tuple[str, ...], tmp_path: Path) -> None:
    """A ``--broker-dir`` that does not exist: one line naming the flag, exit 2 (no warning, no RuntimeError)."""
    missing = tmp_path / "missing"
    proc = _magw(*command, "--broker-dir", str(missing), "--cluster", "east")
    _one_line(proc, 2, "--broker-dir", str(missing))
    assert not missing.exists()


@pytest.mark.parametrize("command", [("globalnet", "show"), ("egress", "show")], ids=lambda c: " ".join(c))
def test_cluster_not_in_broker_dir_is_bad_input(command: tuple[str, ...], tmp_path: Path) -> None:
    """A ``--cluster`` the broker directory has no Cluster document of: one line naming it and the directory's
    clusters, exit 2 (it can never have a snapshot, so "not yet" would mislead)."""
    broker = tmp_path / "broker"
    shutil.copytree(ROOT / "examples" / "broker", broker)
    proc = _magw(*command, "--broker-dir", str(broker), "--cluster", "nowhere")
    _one_line(proc, 2, "--cluster", "'nowhere'", "east, west")


BAD_REMOTES = [
    ("--nb", ("ovn", "show", "--nb", "bogus", "--sb", "unix:/x")),
    ("--sb", ("ovn", "cleanup", "--nb", "unix:/x", "--sb", "tcp:10.0.0.1")),
    ("--nb", ("ovn", "show", "--nb", "tcp:127.0.0.1:99999", "--sb", "unix:/x")),
    ("--ovs-db", ("cleanup", "--netns", "no-such-ns-magw-test", "--ovs-db", "bogus")),
]


@pytest.mark.parametrize(("flag", "argv"), BAD_REMOTES, ids=[" ".join(a) for _f, a in BAD_REMOTES])
def test_bad_ovsdb_remote_is_bad_input(flag: str, argv: tuple[str, ...]) -> None:
    """``--nb``, ``--sb`` and ``--ovs-db`` that are no OVSDB remote: one line naming the flag, exit 2."""
    _one_line(_magw(*argv), 2, flag, "OVSDB remote")


def test_unreachable_ovn_database_is_one_line(tmp_path: Path) -> None:
    """``ovn show`` of a database that is not there: its one line, exit 1, and no ovsdbapp log line before it."""
    nb = f"unix:{tmp_path / 'nb.sock'}"
    proc = _magw("ovn", "show", "--nb", nb, "--sb", f"unix:{tmp_path / 'sb.sock'}", "--timeout", "1")
    _one_line(proc, 1, "cannot reach OVN_Northbound", nb)


class _Reached(Exception):
    """The command got past its namespace guard."""


def _refuse_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the current namespace the host's (as on a workstation) for the guard of ``require_netns``."""
    monkeypatch.setattr(nodeargs, "current_netns_refusal", lambda *_a, **_k: "refusing to change the host's namespace")


def _reached(*_args: object, **_kwargs: object) -> object:
    raise _Reached


@pytest.mark.parametrize("dry_run", [True, False])
def test_apply_dry_run_is_not_refused_in_the_host_namespace(
    monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    """``apply --dry-run`` without ``--netns`` goes on in the host's namespace (it only reads); without
    ``--dry-run`` it is refused (UsageError: exit 2) before it detects anything."""
    _refuse_host(monkeypatch)
    monkeypatch.setattr(apply, "detect", _reached)
    snapshot = ROOT / "examples" / "seed-east.yaml"
    args = argparse.Namespace(snapshot=str(snapshot), node="e-gw1", netns=None, dry_run=dry_run, timings=False)
    with pytest.raises(_Reached if dry_run else UsageError):
        apply.run(args)


@pytest.mark.parametrize("dry_run", [True, False])
def test_cleanup_dry_run_is_not_refused_in_the_host_namespace(
    monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    """``cleanup --dry-run`` without ``--netns`` goes on in the host's namespace (it only reads); without
    ``--dry-run`` it is refused (UsageError: exit 2) before it reads or removes anything."""
    _refuse_host(monkeypatch)
    monkeypatch.setattr(cleanup, "remove_liveness_table", _reached)
    args = argparse.Namespace(netns=None, dry_run=dry_run, ovs_db=None)
    with pytest.raises(_Reached if dry_run else UsageError):
        cleanup.run(args)
