"""``magw lab kubectl``'s bad input: one line, exit 2, kubectl never started (no lab is needed)."""

from __future__ import annotations

import pytest

from tests.support.cli import MagwCli

USAGE = "(usage: magw lab kubectl CLUSTER [--name N] -- KUBECTL-ARGS)"


def test_a_lab_that_does_not_exist(magw_cli: MagwCli) -> None:
    proc = magw_cli("lab", "kubectl", "east", "--name", "kcnolab9", "--", "get", "nodes")
    assert proc.returncode == 2
    assert proc.stderr.startswith("magw: error: no lab named 'kcnolab9'") and len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["east"], f"magw: error: kubectl: no kubectl arguments after '--' {USAGE}"),
        (["east", "--bogus", "x", "--", "get"], f"magw: error: kubectl: unexpected '--bogus' before '--' {USAGE}"),
        (["east", "--name", "Bad_Name", "--", "get"], None),
    ],
)
def test_bad_arguments(magw_cli: MagwCli, args: list[str], line: str | None) -> None:
    proc = magw_cli("lab", "kubectl", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    if line is not None:
        assert proc.stderr.strip() == line
