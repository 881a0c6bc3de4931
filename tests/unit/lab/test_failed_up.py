"""A failed ``lab up`` keeps its files: they are copied out of the state directory (which ``down`` removes) to a
directory it names, the error's paths point at the copy, and an interrupted up says "interrupted" instead of
"(KeyboardInterrupt: )". The build itself is replaced here (no namespaces); tests/lab/ runs the real one."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest

from magw.lab.build import kept, lifecycle
from magw.lab.errors import LabError
from magw.lab.spec import naming
from magw.lab.spec.topology import default_topology


def test_keep_files_copies_regular_files_only(tmp_path: Path) -> None:
    """Files keep their relative paths; a socket (the kube emulators', the OVN servers') is skipped."""
    src = tmp_path / "state"
    (src / "logs").mkdir(parents=True)
    (src / "logs" / "route-agent-east-w1.log").write_text("route_agent.synced\n")
    (src / "state.json").write_text("{}")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(src / "api.sock"))
        assert kept.keep_files(src, tmp_path / "kept") == 2
    assert (tmp_path / "kept" / "logs" / "route-agent-east-w1.log").read_text() == "route_agent.synced\n"
    assert not (tmp_path / "kept" / "api.sock").exists()


def test_repoint_moves_only_paths_inside_the_state_directory() -> None:
    """/run/magw-lab/t1/logs moves; /run/magw-lab/t12 (another lab) does not."""
    msg = "endpoints: 0/4 (see /run/magw-lab/t1/logs); /run/magw-lab/t12/logs; (log: /run/magw-lab/t1)"
    assert kept.repoint(msg, Path("/run/magw-lab/t1"), Path("/tmp/k")) == (
        "endpoints: 0/4 (see /tmp/k/logs); /run/magw-lab/t12/logs; (log: /tmp/k)"
    )


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The labs' state root and the temp dir, both under tmp_path."""
    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path / "run")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return tmp_path / "run", tmp_path / "tmp"


def test_a_second_failure_in_the_same_second_gets_a_directory_of_its_own(places: tuple[Path, Path]) -> None:
    """kept_dir names a directory under the temp dir that does not exist yet."""
    first = kept.kept_dir("t1")
    assert first.parent == places[1]
    first.mkdir()
    assert kept.kept_dir("t1") != first and not kept.kept_dir("t1").exists()


def _fail_after_logging(error: BaseException) -> Any:
    def build_network(*_args: Any, **_kwargs: Any) -> None:
        state_dir = naming.state_dir("tkept")
        (state_dir / "logs" / "gateway-east-gw1.log").write_text("gateway.endpoint_published\n")
        raise error

    return build_network


def test_a_failed_up_keeps_its_logs_and_points_at_them(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LabError names the kept copy, which holds the logs; the state directory is gone as before."""
    run, tmp = places
    monkeypatch.setattr(
        lifecycle, "build_network", _fail_after_logging(LabError(f"endpoints: 0/4 (see {run / 'tkept' / 'logs'})"))
    )
    lines: list[str] = []
    with pytest.raises(LabError) as info:
        lifecycle.up(default_topology(), name="tkept", progress=lines.append)
    (copy,) = tmp.iterdir()
    assert copy.name.startswith("magw-lab-tkept-failed-")
    assert str(info.value) == f"endpoints: 0/4 (see {copy / 'logs'})"
    assert (copy / "logs" / "gateway-east-gw1.log").read_text() == "gateway.endpoint_published\n"
    assert (copy / "state.json").is_file()
    assert not (run / "tkept").exists()
    assert lines[-1] == f"lab tkept's logs and status files are kept in {copy}"


def test_an_interrupted_up_says_so(places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C: "up interrupted (SIGINT)", no "(KeyboardInterrupt: )"; the KeyboardInterrupt goes on up."""
    monkeypatch.setattr(lifecycle, "build_network", _fail_after_logging(KeyboardInterrupt()))
    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        lifecycle.up(default_topology(), name="tkept", progress=lines.append)
    assert "up interrupted (SIGINT); removing lab tkept" in lines
    assert not any("KeyboardInterrupt" in line for line in lines)
    assert os.listdir(places[1])  # kept all the same


def test_failed_line_of_an_error_without_a_message() -> None:
    """An exception with an empty message is named by its type alone, never "(Type: )"."""
    assert lifecycle.failed_line(OSError()) == "up failed (OSError)"
    assert lifecycle.failed_line(LabError("x")) == "up failed (LabError: x)"
