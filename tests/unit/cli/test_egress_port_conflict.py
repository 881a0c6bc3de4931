"""``magw egress bind`` refuses a binding that would put two Services on one port of a VIP (one line, exit 2,
nothing written), and ``magw egress show`` prints a conflict that exists anyway, in text and in JSON, whether or
not a controller has written the VIP's status."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from magw.cli.main import main
from tests.unit.controllers.port_conflict_world import CLASH, files, make_broker, vip_text


@pytest.fixture(autouse=True)
def _keep_log_config() -> Iterator[None]:
    """``main()`` configures logging (level warning): later tests' ``capture_logs`` must still see info."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def _src(d: Path) -> list[str]:
    return ["--broker-dir", str(d), "--cluster", "east"]


def test_bind_refuses_a_port_conflict_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2, one line naming the port, the VIP and both Services; the directory is byte-identical."""
    d = make_broker(tmp_path)
    before = files(d)
    assert main(["egress", "bind", *_src(d), "a", "blog"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "magw: error: egress bind: port 8080/tcp of VIP a would lead to both blog/feed and blog/web: a VIP's port "
        "leads to one Service (give one of them a VIP of its own)\n"
    )
    assert files(d) == before


def test_show_prints_a_conflict_made_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """VIP a's file edited to bind namespace blog, no controller ran: show names the clash under VIP a, and
    nothing under VIP b; --json carries it as the VIP's ``conflicts``."""
    d = make_broker(tmp_path, a_bindings="[{namespace: blog}]")
    assert main(["egress", "show", *_src(d)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if "CONFLICT" in line] == [f"  CONFLICT: {CLASH}"]
    assert lines.index(f"  CONFLICT: {CLASH}") < next(i for i, line in enumerate(lines) if line.startswith("b "))
    assert main(["egress", "show", *_src(d), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {v["name"]: v["conflicts"] for v in shown["vips"]} == {"a": [CLASH], "b": []}
    assert shown["conflicts"] == []


def test_show_prints_a_vip_claimed_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two VIP files both binding namespace shop (the resolver's conflict): one CONFLICT line for it."""
    d = make_broker(tmp_path, a_bindings="[{namespace: shop}]")
    (d / "vip-b.yaml").write_text(vip_text("b", 11, "[{namespace: shop}]"))
    assert main(["egress", "show", *_src(d)]) == 0
    out = capsys.readouterr().out
    assert "CONFLICT: namespace shop is bound to VIPs a and b; a is used\n" in out
