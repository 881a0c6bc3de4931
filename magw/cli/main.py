"""``magw``: the command line entry point and its table of subcommands.

Subcommand modules are imported lazily: only the one being run is imported (so
``magw plan`` never imports pyroute2), and a command whose module is not
installed does not appear at all. Exit codes: 0 ok, 1 runtime failure, 2 bad
input; errors are one line on stderr (``magw: error: ...``), never a traceback
unless ``-vv`` asks for it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

import attrs
import structlog

from magw import __version__
from magw.cli import UsageError, log_level, pyroute2_light
from magw.snapshot.load import SnapshotError
from magw.util.logsetup import FORMATS, configure_logging

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
_EXIT_INTERRUPTED = 130

log = structlog.get_logger("magw.cli")


@attrs.frozen(kw_only=True)
class Command:
    """A subcommand: its name, the module that implements it, and a one-line help."""

    name: str
    module: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command(name="plan", module="magw.cli.plan", help="print the desired state of a node, computed from a snapshot"),
    Command(name="apply", module="magw.cli.apply", help="bring a node's network namespace to its plan (real kernel)"),
    Command(name="cleanup", module="magw.cli.cleanup", help="remove exactly what magw owns from a network namespace"),
    Command(
        name="diagnose",
        module="magw.cli.diagnose",
        help="check a node: kernel, sysctls, MTU, firewall paths, shadowing and stale state",
    ),
    Command(name="lab", module="magw.cli.lab", help="build and run a multi-cluster lab in network namespaces"),
    Command(name="globalnet", module="magw.cli.globalnet", help="show Globalnet objects, their addresses and the pool"),
    Command(name="egress", module="magw.cli.egress", help="bind, unbind and show egress gateway VIPs (broker)"),
    Command(name="ovn", module="magw.cli.ovn", help="the OVN syncer: plan, sync, show and clean up magw's NB rows"),
    Command(name="cable", module="magw.cli.cable", help="a gateway's WireGuard key pair: print or rotate it"),
    Command(name="show", module="magw.cli.show", help="show connections, endpoints, gateways, networks and more"),
    Command(name="verify", module="magw.cli.verify", help="check connectivity across the clusterset, pair by pair"),
    Command(name="benchmark", module="magw.cli.benchmark", help="measure throughput or latency between clusters"),
    Command(name="gather", module="magw.cli.gather", help="one tarball of what a bug report needs (no secrets)"),
    Command(name="top", module="magw.cli.top", help="a live view of gateways, paths, traffic and failovers"),
)


class _ArgumentError(Exception):
    """argparse refused the command line (its message is one line)."""


class _Exit(Exception):
    """argparse finished on its own (``--help``, ``--version``) with this status."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _ReportingParser(argparse.ArgumentParser):
    """An ArgumentParser that reports instead of calling sys.exit, so main() can return an exit code."""

    def error(self, message: str) -> NoReturn:
        raise _ArgumentError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise _Exit(status)


def available_commands() -> tuple[Command, ...]:
    """The commands whose module is installed (looked up without importing it)."""
    return tuple(c for c in COMMANDS if importlib.util.find_spec(c.module) is not None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``magw ARGS`` and return its exit code."""
    if argv is None:  # the console script's own process: start-up counts (docs/performance.md)
        pyroute2_light.install()
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _build_parser(args_list).parse_args(args_list)
    except _ArgumentError as exc:
        return _fail(EXIT_USAGE, str(exc))
    except _Exit as done:
        return done.status
    except ImportError as exc:
        return _fail(EXIT_FAILURE, f"cannot load the command: {exc}")
    if not hasattr(args, "run"):
        return _fail(EXIT_USAGE, f"{args.command}: the command could not be set up")
    try:
        configure_logging(args.log_format, log_level(args.verbose))
    except ValueError as exc:
        return _fail(EXIT_USAGE, str(exc))
    code = _run(args)
    if argv is None and getattr(args, "fast_exit", False):
        _exit_now(code)
    return code


def _exit_now(code: int) -> NoReturn:
    """End the process without the interpreter's teardown, once stdout and stderr are flushed.

    After ``magw apply`` or ``magw plan`` of 100k routes, the teardown (the final collection and freeing
    every module and the objects still alive, one by one) took about 0.2 s of a run (docs/performance.md,
    ``benchmarks/end_to_end.py``'s exit column); the kernel reclaims the memory at once. Only a command
    that opts in (``fast_exit``: no atexit work, every file it wrote closed) and only the console script
    (``argv`` None), never a caller of ``main([...])`` in-process.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or EXIT_FAILURE  # stdout closed or full: what the normal exit would report too
    os._exit(code)


def _run(args: argparse.Namespace) -> int:
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return int(run(args))
    except (UsageError, SnapshotError) as exc:
        return _fail(EXIT_USAGE, str(exc))
    except KeyboardInterrupt:
        return _fail(_EXIT_INTERRUPTED, "interrupted")
    except Exception as exc:
        # debug, not error: the one-line message below is what the user sees; -vv adds the event and traceback
        log.debug("cli.command_failed", command=args.command, error=str(exc), error_type=type(exc).__name__)
        if args.verbose >= 2:
            traceback.print_exc(file=sys.stderr)
        return _fail(EXIT_FAILURE, f"{args.command}: {type(exc).__name__}: {exc}")


def _fail(code: int, message: str) -> int:
    print(f"magw: error: {' '.join(message.split())}", file=sys.stderr)
    return code


def _chosen(argv: Sequence[str], commands: Sequence[Command]) -> Command | None:
    """The subcommand named on the command line: the first word that is a command name."""
    names = {c.name: c for c in commands}
    for word in argv:
        if word == "--":
            return None
        if word in names:
            return names[word]
    return None


def _global_flags(parser: argparse.ArgumentParser, *, default: object) -> None:
    """Flags accepted before and after the subcommand and its sub-verbs (the last parser's value wins)."""
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default="console" if default is None else default,
        help="how log events are written to stderr (default: console)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0 if default is None else default,
        help="more logs: -v info, -vv debug and tracebacks (default: warnings only)",
    )


def _build_parser(argv: Sequence[str]) -> _ReportingParser:
    """The full parser; only the chosen subcommand's module is imported to add its arguments."""
    parser = _ReportingParser(prog="magw", description="Several active gateways per Kubernetes cluster.")
    parser.add_argument("--version", action="version", version=f"magw {__version__}")
    _global_flags(parser, default=None)
    commands = available_commands()
    chosen = _chosen(argv, commands)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands:
        sp = sub.add_parser(command.name, help=command.help, description=command.help)
        _global_flags(sp, default=argparse.SUPPRESS)
        if command is chosen:
            module = importlib.import_module(command.module)
            module.add_arguments(sp)
            _spread_global_flags(sp)
            sp.set_defaults(run=module.run)
    return parser


def _spread_global_flags(parser: argparse.ArgumentParser) -> None:
    """Add the global flags to every nested sub-verb parser (``magw lab status -v``), depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            children: dict[int, argparse.ArgumentParser] = {id(p): p for p in action.choices.values()}
            for child in children.values():
                _global_flags(child, default=argparse.SUPPRESS)
                _spread_global_flags(child)


if __name__ == "__main__":
    sys.exit(main())
