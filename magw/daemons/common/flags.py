"""Command-line flags shared by the daemons, and their validation (one line per error, exit 2)."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence
from typing import NoReturn

from magw.sources.file.documents import check_name
from magw.sources.flags import add_source_arguments, check_source
from magw.util.logsetup import FORMATS, LEVELS

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is ONE line on stderr (``prog: error: --flag: reason``) and exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 (off) or a port 1-65535, got {value}")
    return value


def _name(text: str) -> str:
    try:
        return check_name(text, "name")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} must be letters, digits, '.', '_' or '-'") from None


def ipv4(text: str) -> ipaddress.IPv4Address:
    try:
        return ipaddress.IPv4Address(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 address") from None


def common_parser(prog: str, description: str, *, broker: bool = False) -> OneLineParser:
    """The flags both daemons take."""
    p = OneLineParser(prog=prog, description=description)
    add_source_arguments(p, broker=broker)
    p.add_argument("--node", required=True, type=_name, help="this node's name (its Node document's name)")
    p.add_argument("--cluster", required=True, type=_name, help="this node's cluster id (the local cluster)")
    p.add_argument(
        "--resync-period",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="full resync every SECONDS (default 30)",
    )
    p.add_argument("--log-format", choices=FORMATS, default="console", help="log format on stderr (default console)")
    p.add_argument("--log-level", choices=LEVELS, default="info", help="lowest level logged (default info)")
    p.add_argument(
        "--metrics-port",
        type=_port,
        default=0,
        metavar="PORT",
        help="serve Prometheus metrics on 127.0.0.1:PORT in this namespace (default 0: off)",
    )
    return p


def parse(parser: OneLineParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse and check what argparse cannot: the source's flags fit together (the broker directory exists...)."""
    args = parser.parse_args(argv)
    check_source(parser, args)
    return args
