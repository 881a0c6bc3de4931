"""The command line's global flags work before and after every verb and sub-verb; an unknown lab exits 2.

Subprocess runs of ``python -m magw.cli.main`` against a lab name nobody uses: no
namespace is made, nothing needs the kernel. The parser tree is also walked to
check that no (sub-)verb was left without the global flags.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest

from magw.cli import main as cli_main
from tests.support.cli import MagwCli
from tests.support.labkit import unique_name
from tests.support.paths import REPO


def _parsers(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, child in action.choices.items():
                found += _parsers(child, f"{path} {word}")
    return found


def test_every_verb_and_sub_verb_takes_the_global_flags() -> None:
    """Every parser reachable from `magw` (with each command's module loaded) accepts -v and --log-format."""
    missing = []
    for command in cli_main.available_commands():
        for path, parser in _parsers(cli_main._build_parser([command.name]), "magw"):
            options = {opt for action in parser._actions for opt in action.option_strings}
            if not {"-v", "--verbose", "--log-format"} <= options:
                missing.append(path)
    assert missing == []


def _events(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


@pytest.mark.parametrize(
    "where",
    [
        ["-v", "--log-format", "json", "lab", "down", "--name", "NAME"],
        ["lab", "-v", "--log-format", "json", "down", "--name", "NAME"],
        ["lab", "down", "--name", "NAME", "-v", "--log-format", "json"],
        ["lab", "down", "-v", "--name", "NAME", "--log-format=json"],
    ],
)
def test_global_flags_before_and_after_a_lab_sub_verb(where: list[str], magw_cli: MagwCli) -> None:
    """`-v --log-format json` anywhere around `lab down` turns on info events as JSON (lab.down_done)."""
    name = unique_name()
    proc = magw_cli(*[name if w == "NAME" else w for w in where])
    events = [(e["event"], e["level"], e["name"]) for e in _events(proc.stderr)]
    assert ("lab.down_done", "info", name) in events
    assert proc.returncode == 2


def test_verbose_after_lab_status(magw_cli: MagwCli) -> None:
    """`magw lab status -v` is accepted (it used to be refused as an unrecognized argument)."""
    name = unique_name()
    proc = magw_cli("lab", "status", "--name", name, "-v")
    assert "unrecognized" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(f"magw: error: no lab named {name!r} (")


def test_later_global_flags_win(magw_cli: MagwCli) -> None:
    """A flag after the sub-verb overrides the one before the command: json then console means console."""
    name = unique_name()
    proc = magw_cli("--log-format", "json", "lab", "down", "--name", name, "-v", "--log-format", "console")
    assert _events(proc.stderr) == []
    assert re.search(r"\[info\s*\] lab\.down_done", proc.stderr)


@pytest.mark.parametrize(
    "verb",
    [
        ["status"],
        ["status", "--json"],
        ["down"],
        ["exec", "east-gw1", "--", "true"],
        ["fail", "east-gw1"],
        ["fail", "east-gw1", "--wan-only"],
        ["recover", "east-gw1"],
        ["verify"],
    ],
)
def test_unknown_lab_exits_2_with_one_line(verb: list[str], magw_cli: MagwCli) -> None:
    """Every verb that acts on an existing lab exits 2 (bad input) with one line when the lab does not exist."""
    name = unique_name()
    if verb[0] != "exec":
        proc = magw_cli("lab", *verb, "--name", name)
    else:
        proc = magw_cli("lab", "exec", "east-gw1", "--name", name, "--", "true")
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert re.fullmatch(rf"magw: error: no lab named '{name}' \((no labs|labs: [a-z0-9, ]+)\)", lines[0])
    assert proc.stdout == ""


def test_exec_takes_global_flags_between_node_and_the_command(magw_cli: MagwCli) -> None:
    """`magw lab exec NODE --name N -v --log-format json -- CMD` reads the flags (here: unknown lab, exit 2)."""
    name = unique_name()
    proc = magw_cli("lab", "exec", "east-gw1", "--name", name, "-v", "--log-format", "json", "--", "true")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith(f"magw: error: no lab named {name!r}")


def test_exec_refuses_an_unknown_flag_before_the_command(magw_cli: MagwCli) -> None:
    """An unknown flag between NODE and `--` is bad input: exit 2, one line with the usage."""
    proc = magw_cli("lab", "exec", "east-gw1", "--bogus", "--", "true")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "magw: error: exec: unrecognized arguments: --bogus before '--' "
        "(usage: magw lab exec NODE [--name N] [-v] [--log-format F] -- CMD)"
    ]


def test_the_command_line_does_not_import_rich() -> None:
    """Importing magw.cli.main in a fresh interpreter leaves rich out (structlog.dev would pull it in, ~0.1 s)."""
    code = "import sys, magw.cli.main; print(sys.modules.get('rich') is not None)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def _process_run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run main() as the console script does (argv from sys.argv), with an atexit handler that says 'teardown'."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('teardown', file=sys.stderr))\n"
        "from magw.cli.main import main\n"
        f"sys.argv = ['magw', *{list(args)!r}]\n"
        "sys.exit(main())\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_plan_as_a_process_skips_teardown_and_keeps_its_output_and_code(capsys: pytest.CaptureFixture[str]) -> None:
    """``magw plan`` run as a process ends without interpreter teardown (no atexit), yet its whole stdout
    arrives, identical to an in-process run of main([...]), and exit codes are kept."""
    args = ["plan", "--snapshot", str(REPO / "examples" / "three-clusters.yaml"), "--node", "e-gw1", "--format", "json"]
    done = _process_run(*args)
    assert (done.returncode, done.stderr) == (0, "")
    assert cli_main.main(args) == 0
    expected = capsys.readouterr().out
    assert done.stdout == expected and json.loads(done.stdout)
    bad = _process_run("plan", "--snapshot", str(REPO / "examples" / "three-clusters.yaml"), "--node", "nope")
    assert bad.returncode == 2
    assert bad.stderr.startswith("magw: error: ") and "teardown" not in bad.stderr


def test_in_process_main_returns_instead_of_exiting() -> None:
    """main([...]) called with an argument list (a library caller, a test) returns the code; no fast exit."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('teardown', file=sys.stderr))\n"
        "from magw.cli.main import main\n"
        f"print('code', main(['plan', '--snapshot', {str(REPO / 'examples' / 'seed-east.yaml')!r}, '--node', 'x']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "code 2" in done.stdout
    assert done.stderr.rstrip().endswith("teardown")
