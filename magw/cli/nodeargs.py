"""The ``--netns`` flag shared by apply, cleanup and diagnose, and opening a node's real drivers."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from magw.cli import UsageError
from magw.drivers.netlink.driver import NetlinkDriver
from magw.drivers.netlink.session import NoSuchNetns, check_netns
from magw.drivers.nft.driver import NftDriver
from magw.drivers.node import NodeDriver


def add_netns_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--netns",
        metavar="NS",
        default=None,
        help="an existing network namespace (ip netns) to work in; default: the current namespace",
    )


def require_netns(netns: str | None) -> str | None:
    """``netns`` if it exists (or is None); UsageError "no such network namespace" otherwise."""
    try:
        check_netns(netns)
    except NoSuchNetns as exc:
        raise UsageError(f"--netns: no such network namespace: {netns}") from exc
    return netns


@contextlib.contextmanager
def open_node_driver(netns: str | None) -> Iterator[NodeDriver]:
    """A NodeDriver over the real netlink and nft drivers in ``netns``, closed afterwards."""
    with NetlinkDriver(netns) as netlink, NftDriver(netns) as nft:
        yield NodeDriver(netlink=netlink, nft=nft)
