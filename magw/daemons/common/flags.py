"""Command-line flags shared by the daemons, and their validation (one line per error, exit 2)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import sys
import urllib.parse
from collections.abc import Sequence
from typing import NoReturn

import magw
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


def non_negative_seconds(text: str) -> float:
    """Seconds, 0 allowed (e.g. a grace period that may be none)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, got {text}")
    return value


def _port_number(text: str, *, off: bool) -> int:
    """A port 1..65535, or 0 as well when ``off`` (a flag whose 0 switches something off)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not (0 if off else 1) <= value <= 65535:
        what = "0 (off) or a port 1-65535" if off else "a port 1-65535"
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def _port(text: str) -> int:
    return _port_number(text, off=True)


def port_or_off(text: str) -> int:
    """A port 1..65535, or 0: off."""
    return _port_number(text, off=True)


def udp_port(text: str) -> int:
    """A port 1..65535 (no 0: nothing to switch off)."""
    return _port_number(text, off=False)


def host_port(text: str) -> str:
    """``HOST:PORT`` (HOST may be empty, PORT 0-65535); returned as given, the daemons split it themselves."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: the port must be 0-65535")
    if host:
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            if not _HOSTNAME.fullmatch(host):
                raise argparse.ArgumentTypeError(f"{text!r}: {host!r} is not an address or host name") from None
    return text


_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*")


def in_existing_directory(text: str) -> str:
    """A path whose parent directory exists (the file or directory itself is made by the daemon)."""
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{text!r}: no such directory: {parent}")
    return text


def interface_name(text: str) -> str:
    """A Linux interface name: 1-15 characters, no '/', ':' or white space."""
    if not 0 < len(text) <= 15 or any(c in text for c in "/: \t\n") or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} is not an interface name (1-15 characters, no '/', ':' or space)")
    return text


def url(text: str) -> str:
    """An ``http://`` or ``https://`` base URL with a host."""
    parts = urllib.parse.urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL with a host")
    return text


def _ovsdb_remote(remote: str) -> bool:
    kind, sep, rest = remote.partition(":")
    if not sep or not rest:
        return False
    if kind == "unix":
        return True
    host, sep, port = rest.rpartition(":")
    return kind in ("tcp", "ssl") and bool(sep and host and port.isdigit() and 0 < int(port) <= 65535)


def ovsdb_remote(text: str) -> str:
    """An OVSDB remote a client connects to: ``unix:PATH``, ``tcp:HOST:PORT`` or ``ssl:HOST:PORT`` (an IPv6 HOST
    in brackets), or several separated by commas, as ``ovsdb-client`` takes them."""
    if not all(_ovsdb_remote(part) for part in text.split(",")):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an OVSDB remote (unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT)"
        )
    return text


def name(text: str) -> str:
    """A document name: letters, digits, '.', '_' or '-'."""
    return _name(text)


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


def add_version(p: argparse.ArgumentParser) -> None:
    """``--version``: ``<prog> <version>`` on stdout, exit 0."""
    p.add_argument("--version", action="version", version=f"{p.prog} {magw.__version__}")


def add_log_arguments(p: argparse.ArgumentParser) -> None:
    """``--log-format`` and ``--log-level``, their choices shown in ``--help``."""
    p.add_argument(
        "--log-format", choices=FORMATS, default="console", help="log format on stderr: %(choices)s (default console)"
    )
    p.add_argument(
        "--log-level", choices=LEVELS, default="info", help="lowest level logged: %(choices)s (default info)"
    )


def common_parser(prog: str, description: str, *, broker: bool = False) -> OneLineParser:
    """The flags both daemons take."""
    p = OneLineParser(prog=prog, description=description)
    add_version(p)
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
    add_log_arguments(p)
    add_metrics_argument(p)
    return p


def _metrics_address(text: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 address") from None


def add_metrics_argument(p: argparse.ArgumentParser) -> None:
    """``--metrics-port``, ``--metrics-address``: Prometheus metrics on ADDRESS:PORT of the daemon's namespace
    (docs/metrics.md)."""
    p.add_argument(
        "--metrics-port",
        type=_port,
        default=0,
        metavar="PORT",
        help="serve Prometheus metrics on --metrics-address:PORT in this namespace (default 0: off)",
    )
    p.add_argument(
        "--metrics-address",
        type=_metrics_address,
        default="127.0.0.1",
        metavar="IPV4",
        help="the address the metrics are served on (default 127.0.0.1: from this namespace only; a Prometheus on "
        "another host needs the pod's or node's IP, or 0.0.0.0: every address, with hostNetwork the node's public "
        "ones too)",
    )


def parse(parser: OneLineParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse and check what argparse cannot: the source's flags fit together (the broker directory exists...)."""
    args = parser.parse_args(argv)
    check_source(parser, args)
    return args
