"""The five daemons refuse a bad flag in ONE line on stderr and exit 2, never with a traceback (docs/daemons.md).

Each daemon runs as its console script (``Path(sys.executable).parent``), as a user would, with otherwise valid
flags (an empty broker directory in ``tmp_path``) and one bad value from the table below. The line must name the
flag: a daemon that prints its whole usage first, lets the value through to a ``bind()`` (``ValueError``,
``OverflowError``, ``FileNotFoundError``) or creates a missing ``--workdir`` parent fails here. No test starts a
daemon for real: every command is refused while parsing, and a timeout catches one that is not.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

import magw
from magw.daemons.egressgw import main as egress_main
from magw.daemons.egressgw_agent import main as agent_main

BIN = Path(sys.executable).parent
TIMEOUT = 30
DAEMONS = ("magw-route-agent", "magw-gateway", "magw-globalnet", "magw-egress", "magw-egress-agent")


def _valid(daemon: str, tmp: Path) -> dict[str, str]:
    """Flags with which ``daemon`` would start (the file source, an empty broker directory)."""
    broker = tmp / "broker"
    broker.mkdir(exist_ok=True)
    flags = {"--broker-dir": str(broker), "--cluster": "east"}
    if daemon in ("magw-route-agent", "magw-gateway", "magw-egress-agent"):
        flags["--node"] = "e-gw1"
    if daemon == "magw-route-agent":
        flags["--fake"] = ""
    if daemon == "magw-egress":
        flags["--listen"] = "127.0.0.1:0"
    if daemon == "magw-egress-agent":
        flags["--workdir"] = str(tmp / "work")
        flags["--status-listen"] = "127.0.0.1:0"  # never the default 0.0.0.0:9620, should a refusal regress
    return flags


# (daemon, flag, bad value); the value replaces the flag's valid one, the other flags stay valid.
COMMON: list[tuple[str, str]] = [
    ("--cluster", "no/slash"),
    ("--log-level", "loud"),
    ("--log-format", "xml"),
    ("--broker-dir", "/nonexistent/broker"),
]
SPECIFIC: list[tuple[str, str, str]] = [
    ("magw-route-agent", "--node", "bad name"),
    ("magw-route-agent", "--resync-period", "0"),
    ("magw-route-agent", "--metrics-port", "99999"),
    ("magw-route-agent", "--cni-interface", "a/b"),
    ("magw-route-agent", "--probe-interval", "soon"),
    ("magw-route-agent", "--probe-budget", "-5"),
    ("magw-route-agent", "--probe-budget", "lots"),
    ("magw-route-agent", "--probe-min-interval", "-1"),
    ("magw-route-agent", "--ovn-nb", "bogus"),
    ("magw-gateway", "--metrics-port", "http"),
    ("magw-gateway", "--private-ip", "10.0.0.300"),
    ("magw-gateway", "--heartbeat", "-1"),
    ("magw-globalnet", "--lease-duration", "0"),
    ("magw-globalnet", "--gateway-grace", "-5"),
    ("magw-globalnet", "--resync", "x"),
    ("magw-globalnet", "--poll-interval", "inf"),
    ("magw-egress", "--listen", "notaport"),
    ("magw-egress", "--listen", "127.0.0.1:99999"),
    ("magw-egress", "--listen", "127.0.0.1:-1"),
    ("magw-egress", "--listen", "bad host!:80"),
    ("magw-egress", "--socket", "/nonexistent/dir/x.sock"),
    ("magw-egress", "--interval", "0"),
    ("magw-egress-agent", "--status-listen", "127.0.0.1:99999"),
    ("magw-egress-agent", "--status-listen", "9620"),
    ("magw-egress-agent", "--node", ""),
    ("magw-egress-agent", "--interface", "much-too-long-name0"),
    ("magw-egress-agent", "--controller-url", "ftp://x"),
    ("magw-egress-agent", "--controller-socket", "/nonexistent/dir/api.sock"),
]
CASES = [(d, f, v) for d in DAEMONS for f, v in COMMON] + SPECIFIC


def _run(daemon: str, flags: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / daemon)]
    for flag, value in flags.items():
        argv += [flag] if value == "" and flag == "--fake" else [flag, value]
    return subprocess.run([*argv, *extra], capture_output=True, text=True, timeout=TIMEOUT)


def _assert_one_line(proc: subprocess.CompletedProcess[str], daemon: str, flag: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{daemon}: error: "), lines[0]
    assert flag in lines[0], lines[0]


@pytest.mark.parametrize(("daemon", "flag", "value"), CASES, ids=[f"{d}{f}={v}" for d, f, v in CASES])
def test_bad_value_is_one_line_and_exit_2(daemon: str, flag: str, value: str, tmp_path: Path) -> None:
    """A bad value of any daemon flag: exit 2, one line ``<daemon>: error: ...`` naming the flag, no traceback."""
    flags = _valid(daemon, tmp_path)
    if flag == "--ovn-nb":
        flags["--ovn-sb"] = "unix:/x"  # --ovn-nb goes with --ovn-sb: only the bad remote is wrong
    flags[flag] = value
    _assert_one_line(_run(daemon, flags), daemon, flag)


@pytest.mark.parametrize("daemon", DAEMONS)
def test_missing_required_flag_is_one_line(daemon: str, tmp_path: Path) -> None:
    """A missing required flag is one line too (argparse's usage is not printed before it)."""
    flags = _valid(daemon, tmp_path)
    del flags["--cluster"]
    _assert_one_line(_run(daemon, flags), daemon, "--cluster")


def test_workdir_with_missing_parent_is_refused_not_created(tmp_path: Path) -> None:
    """``magw-egress-agent --workdir`` whose parent does not exist: one line, exit 2, and nothing is created."""
    flags = _valid("magw-egress-agent", tmp_path)
    workdir = tmp_path / "missing" / "dir"
    flags["--workdir"] = str(workdir)
    _assert_one_line(_run("magw-egress-agent", flags), "magw-egress-agent", "--workdir")
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("daemon", DAEMONS)
def test_version(daemon: str) -> None:
    """``--version`` prints ``<daemon> <magw.__version__>`` and exits 0, needing no other flag."""
    proc = subprocess.run([str(BIN / daemon), "--version"], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{daemon} {magw.__version__}\n"


@pytest.mark.parametrize("daemon", DAEMONS)
def test_help_shows_the_log_choices(daemon: str) -> None:
    """``--help`` lists the choices of ``--log-level`` and ``--log-format``."""
    proc = subprocess.run([str(BIN / daemon), "--help"], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert "--log-level {debug,info,warning,error}" in proc.stdout
    assert "--log-format {console,json}" in proc.stdout


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The in-process ``main()`` calls point logging at pytest's captured stderr, closed after the test: put the
    previous structlog configuration and root handlers back, or later tests log to a closed file."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


def _refused_bind(*_args: object) -> object:
    async def fail() -> None:
        raise OSError(98, "Address already in use")

    return fail()


def test_egress_bind_failure_is_one_log_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``magw-egress`` whose socket or port cannot be bound (taken) logs ``egress.failed`` and exits 1."""
    monkeypatch.setattr(egress_main, "run", _refused_bind)
    (tmp_path / "broker").mkdir()
    argv = ["--cluster", "east", "--broker-dir", str(tmp_path / "broker")]
    code = egress_main.main([*argv, "--socket", str(tmp_path / "e.sock")])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert "egress.failed" in err and "Address already in use" in err


def test_egress_agent_bind_failure_is_one_log_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``magw-egress-agent`` whose status port cannot be bound (taken) logs ``egress_agent.failed``, exits 1."""
    monkeypatch.setattr(agent_main, "run", _refused_bind)
    (tmp_path / "broker").mkdir()
    argv = ["--cluster", "east", "--node", "n1", "--broker-dir", str(tmp_path / "broker")]
    code = agent_main.main([*argv, "--workdir", str(tmp_path / "work"), "--status-listen", "127.0.0.1:0"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert "egress_agent.failed" in err and "Address already in use" in err


