"""The ``--netns`` flag shared by apply, cleanup and diagnose, the guard of the current namespace, and
opening a node's real drivers.

Without ``--netns`` a command works in the namespace it runs in. ``apply`` and
``cleanup`` change it, so there they refuse (exit 2, one line) when it is the
host's initial namespace or when they cannot tell (``magw.drivers.netns``),
unless ``--allow-init-netns`` is given. A ``--netns NAME`` that is an alias of
the host's namespace (or may be) is refused the same way. The flag reaches ``require_netns``
through ``args.netns`` itself (``CURRENT_ALLOWED``), so a command only calls
``add_netns_argument`` and ``require_netns(args.netns)``.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
from collections.abc import Iterator, Sequence
from typing import Any

from magw.cli import UsageError
from magw.drivers.netlink.driver import NetlinkDriver
from magw.drivers.netns import (
    ALLOW_FLAG,
    NoSuchNetns,
    check_netns,
    current_netns_refusal,
    initial_netns,
    netns_path,
)
from magw.drivers.nft.driver import NftDriver
from magw.drivers.node import NodeDriver


class CurrentNetns(enum.Enum):
    """``args.netns`` after ``--allow-init-netns`` without ``--netns``: the current namespace, guard waived."""

    ALLOWED = "allowed"


CURRENT_ALLOWED = CurrentNetns.ALLOWED
_INSTEAD = "name the node's namespace with --netns NS"


class _AllowInitial(argparse.Action):
    """``--allow-init-netns``: marks ``args.netns`` unless ``--netns NS`` names a namespace (in any order)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        if getattr(namespace, "netns", None) is None:
            namespace.netns = CURRENT_ALLOWED


def add_netns_argument(parser: argparse.ArgumentParser, *, guard: bool = True) -> None:
    """``--netns NS``, plus ``--allow-init-netns`` for a command that changes the namespace (``guard``)."""
    parser.add_argument(
        "--netns",
        metavar="NS",
        default=None,
        help="an existing network namespace (ip netns) to work in; default: the current namespace",
    )
    if guard:
        parser.add_argument(
            ALLOW_FLAG,
            action=_AllowInitial,
            dest="netns",
            default=argparse.SUPPRESS,
            help="without --netns, allow changing the current namespace even when it is, or may be, the host's "
            "initial one (refused by default)",
        )


def require_netns(netns: str | CurrentNetns | None, *, guard: bool = True) -> str | None:
    """The namespace to work in: a checked name, or None for the current namespace.

    UsageError when ``netns`` names no network namespace, or (``guard``) when it is None and
    the current namespace is, or may be, the host's initial one.
    """
    if netns is CURRENT_ALLOWED:
        return None
    if isinstance(netns, str):
        try:
            check_netns(netns)
        except NoSuchNetns as exc:
            raise UsageError(f"--netns: {exc}") from exc
        if guard:
            _refuse_host_alias(netns)
        return netns
    if guard:
        refused = current_netns_refusal("change", allow=False, instead=_INSTEAD)
        if refused is not None:
            raise UsageError(refused)
    return None


def _refuse_host_alias(netns: str) -> None:
    """A named namespace may be the host's own (``ip netns attach host 1``, a bind mount of
    ``/proc/1/ns/net``): refuse it like the current one, and also when we cannot tell."""
    verdict = initial_netns(own=netns_path(netns))
    if verdict.initial is False:
        return
    what = "is the host's initial network namespace" if verdict.initial else "may be the host's initial namespace"
    raise UsageError(
        f"--netns {netns}: refusing, it {what} ({verdict.reason}); to change the host's own namespace on "
        f"purpose, run without --netns and pass {ALLOW_FLAG}"
    )


@contextlib.contextmanager
def open_node_driver(netns: str | None) -> Iterator[NodeDriver]:
    """A NodeDriver over the real netlink and nft drivers in ``netns``, closed afterwards."""
    with NetlinkDriver(netns) as netlink, NftDriver(netns) as nft:
        yield NodeDriver(netlink=netlink, nft=nft)
