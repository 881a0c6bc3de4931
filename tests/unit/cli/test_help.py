"""Every console script and every ``magw`` subcommand, nested ones too, answers ``--help`` (docs/cli.md).

The scripts are those of ``pyproject.toml``'s ``[project.scripts]``, run from the venv that runs the tests
(``Path(sys.executable).parent``), as a user would. The subcommands are discovered from the parser that
``magw.cli.main`` builds (the one ``magw`` itself parses with), so a new command or verb is covered without
editing this file. A ``--help`` that crashes (an import error in a subcommand module, a bad ``add_arguments``)
exits non-zero or prints a traceback instead of the usage.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from magw.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
KNOWN_SCRIPTS = {"magw", "magw-route-agent", "magw-gateway", "magw-globalnet", "magw-egress", "magw-egress-agent"}
KNOWN_COMMANDS = {
    "plan", "apply", "cleanup", "diagnose", "lab", "globalnet", "egress", "ovn", "cable",
    "show", "verify", "benchmark", "gather", "top",
}  # fmt: skip
TIMEOUT = 60


def console_scripts() -> list[str]:
    """The console script names of ``pyproject.toml``, sorted."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return sorted(tomllib.load(f)["project"]["scripts"])


def _nested(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The paths of ``parser``'s subcommands, depth first, each once (an alias is not a second command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) in seen:
                    continue
                seen.add(id(child))
                yield (*path, name)
                yield from _nested(child, (*path, name))


def magw_subcommands() -> list[tuple[str, ...]]:
    """Every ``magw`` subcommand path (``("lab",)``, ``("lab", "up")``, ...), from the parser ``magw`` builds.

    That parser imports a command's module (and so adds its verbs) only for the command named on the command
    line, so it is built once per command, as ``magw <command> ...`` builds it.
    """
    paths: list[tuple[str, ...]] = []
    for command in cli_main.available_commands():
        parser = cli_main._build_parser([command.name])
        paths += [p for p in _nested(parser, ()) if p[0] == command.name]
    return paths


def _help(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*argv, "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=TIMEOUT, check=False
    )


def _assert_usage(proc: subprocess.CompletedProcess[str], usage: str) -> None:
    what = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, what
    assert proc.stdout.startswith(f"usage: {usage} ") or proc.stdout.startswith(f"usage: {usage}\n"), what
    assert "Traceback" not in proc.stdout + proc.stderr, what


def test_console_scripts_are_the_known_ones() -> None:
    """pyproject.toml declares the six console scripts (so the --help test below covers each of them)."""
    assert set(console_scripts()) >= KNOWN_SCRIPTS


def test_discovery_finds_every_top_level_command_and_nested_verbs() -> None:
    """The discovered subcommands include every known top-level command and nested verbs such as
    ``lab up`` and ``egress bind``: a discovery that finds nothing would make the test below vacuous."""
    paths = magw_subcommands()
    assert paths
    assert {p[0] for p in paths if len(p) == 1} >= KNOWN_COMMANDS
    assert set(paths) >= {("lab", "up"), ("egress", "bind"), ("ovn", "sync"), ("globalnet", "show")}
    assert len(paths) == len(set(paths))


@pytest.mark.parametrize("script", console_scripts())
def test_console_script_help(script: str) -> None:
    """``<script> --help`` exits 0 and prints the usage of that program, without a traceback."""
    path = BIN / script
    assert path.exists(), f"{path} is not installed (pip install -e '.[test]')"
    _assert_usage(_help([str(path)]), script)


@pytest.mark.parametrize("path", magw_subcommands(), ids=" ".join)
def test_magw_subcommand_help(path: tuple[str, ...]) -> None:
    """``magw <command> [<verb>...] --help`` exits 0 and prints that subcommand's usage, without a traceback."""
    _assert_usage(_help([str(BIN / "magw"), *path]), " ".join(("magw", *path)))
