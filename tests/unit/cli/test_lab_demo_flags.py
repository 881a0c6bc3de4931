"""``magw lab demo`` refuses, in one line and with exit 2, flags that the chosen demo would ignore (two demos at
once, --flows for a demo that sends none, the egress demo on Kubernetes emulators) and a --flows out of range,
before anything is built."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from magw.cli.main import main
from magw.lab.build import lifecycle


@pytest.fixture(autouse=True)
def _no_lab(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No lab is ever built here: a demo that got past its checks fails the test instead."""

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the demo started to build a lab")

    monkeypatch.setattr(lifecycle, "up", refuse)
    saved = structlog.get_config()  # main() configures logging; later tests' capture_logs must still work
    yield
    structlog.configure(**saved)


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--globalnet", "--egress-gateway"],
         "demo: --globalnet and --egress-gateway are two different demos: give one of them"),
        (["--globalnet", "--flows", "8"],
         "demo: --flows is the default demo's spread measurement; --globalnet sends no such flows"),
        (["--egress-gateway", "--flows", "8"],
         "demo: --flows is the default demo's spread measurement; --egress-gateway sends no such flows"),
        (["--egress-gateway", "--cni", "ovn"],
         "demo: --cni ovn: not with --egress-gateway (the demo shows unbound pods leaving as their node, which the OVN "
         "lab has no way out for; use lab up --cni ovn with an egress: topology)"),
        (["--cni", "calico"], "argument --cni: invalid choice: 'calico' (choose from 'generic', 'ovn')"),
        (["--flows", "0"], "argument --flows: must be from 1 to 1024, got 0"),
        (["--flows", "1025"], "argument --flows: must be from 1 to 1024, got 1025"),
        (["--flows", "many"], "argument --flows: 'many' is not a whole number"),
    ],
)  # fmt: skip
def test_a_refused_demo_flag_is_one_line_and_exit_2(
    flags: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each refusal: exit 2, nothing on stdout, exactly one line on stderr naming the flags."""
    assert main(["lab", "demo", "--name", "tflagsx", *flags]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"magw: error: {error}\n")
