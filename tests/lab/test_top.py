"""Kernel test: ``magw top`` driven in tmux against a running lab, its screen read back (docs/show.md).

One small lab for the module (east and west, two gateways and one worker each, file broker), with a unique
name, always removed. ``top`` runs in a detached tmux session of our own tmux server (its own socket, killed
afterwards) with a fixed size; the test reads the screen with ``capture-pane``, cuts a gateway's WAN link and
waits for the failover to show, then presses ``q`` and checks that ``top`` exited with status 0.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.scenarios.failure import fail
from magw.lab.spec.layout import LabLayout
from tests.support.cli import MagwCli
from tests.support.paths import REPO
from tests.support.small_lab import poll_for, small_lab

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup.sh installs it)"),
]


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    with small_lab() as made:
        yield made


def test_once_json(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """One frame: every gateway with the rates of its tunnel and WAN link (the health probes cross both all the
    time, so neither is idle), its tracked flows, and its two paths up."""
    lab_layout, st = lab

    def frame() -> dict[str, Any]:
        out = magw_cli("top", "--lab", st.name, "--once", "--json")
        assert out.returncode == 0, out.stderr
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc

    def ready(doc: dict[str, Any]) -> bool:
        return all(len(n["paths"]) == 2 and all(p["state"] == "up" for p in n["paths"]) for n in doc["nodes"])

    doc = poll_for("every path up", frame, ready)
    assert sorted(n["node"] for n in doc["nodes"]) == sorted(g.name for g in lab_layout.gateways)
    for n in doc["nodes"]:
        assert isinstance(n["flows"], int)
        assert n["rates"]["vxlan-tunnel"]["rx_pps"] > 0
        assert n["rates"]["wan0"]["tx_bps"] > 0
        assert n["last_failover"] is None


class Tmux:
    """Our own tmux server (its own socket name), so nothing of anyone else's tmux is touched."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def screen(self, target: str) -> str:
        return self("capture-pane", "-p", "-t", target)

    def pane(self, target: str, fmt: str) -> str:
        return self("display-message", "-p", "-t", target, fmt).strip()


def test_top_in_tmux(lab: tuple[LabLayout, LabState], tmp_path: Path) -> None:
    """The live screen shows every gateway and its paths; a cut WAN link shows as the last failover with its
    detection cost on the gateways that probe it; q quits with status 0."""
    lab_layout, st = lab
    tmux = Tmux(f"magw-test-{st.name}")
    session = "top"
    # top's exit status, written by the pane's shell (tmux's #{pane_dead_status} came out empty when its server
    # was started from pytest)
    status = tmp_path / "top-exit-status"
    command = shlex.join([sys.executable, "-m", "magw.cli.main", "top", "--lab", st.name])
    command += f"; echo $? > {shlex.quote(str(status))}"
    try:
        # -f /dev/null: nobody's tmux.conf changes the session
        tmux("-f", "/dev/null", "new-session", "-d", "-s", session, "-x", "160", "-y", "60", "-c", str(REPO),
             command, ";", "set-option", "-t", session, "remain-on-exit", "on")  # fmt: skip
        assert tmux.pane(session, "#{pane_width}x#{pane_height}") == "160x60"
        screen = poll_for(
            "every gateway and path on the screen",
            lambda: tmux.screen(session),
            lambda text: (
                all(f"{g.name} ({g.cluster})" in text for g in lab_layout.gateways)
                and text.count("-> ") == 8
                and " up " in text
                and "tx" in text
            ),
        )
        assert "magw top - lab" in screen and "q quits" in screen
        fail(st.name, "west-gw2", wan_only=True)

        def failover_shown(text: str) -> bool:
            east = [line for line in text.splitlines() if line.startswith(("east-gw1 (east)", "east-gw2 (east)"))]
            return len(east) == 2 and all("last failover: west-gw2 down" in line and "detected in" in line
                                          for line in east)  # fmt: skip

        poll_for("the failover on east's gateways", lambda: tmux.screen(session), failover_shown)
        tmux("send-keys", "-t", session, "q")
        poll_for("top exited", lambda: tmux.pane(session, "#{pane_dead}"), lambda dead: dead == "1", limit=30)
        assert status.read_text() == "0\n"
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30, check=False)
