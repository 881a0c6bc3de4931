"""Helpers for kernel tests of the real node driver: a node's CNI-side device, the real drivers, one sync."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from ipaddress import IPv4Address

import attrs

from magw.desired.state import DesiredState
from magw.drivers.netlink.driver import NetlinkDriver
from magw.drivers.nft.driver import NftDriver
from magw.drivers.node import NodeDriver
from magw.reconcile.changeset import ChangeSet
from magw.reconcile.diff import diff
from magw.reconcile.driver import ApplyResult, Driver
from tests.support.netns import run


def add_cni_device(ns: str, cni_ip: IPv4Address | str, name: str = "cni0") -> None:
    """A veth pair inside ``ns`` whose end ``name`` holds ``cni_ip``/24: routes may then use it as ``src``."""
    run(ns, "ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p")
    run(ns, "ip", "addr", "add", f"{cni_ip}/24", "dev", name)
    run(ns, "ip", "link", "set", name, "up")
    run(ns, "ip", "link", "set", f"{name}p", "up")


@contextlib.contextmanager
def real_node_driver(ns: str) -> Iterator[NodeDriver]:
    """The real netlink + nft drivers in ``ns``, closed afterwards."""
    with NetlinkDriver(ns) as netlink, NftDriver(ns) as nft:
        yield NodeDriver(netlink=netlink, nft=nft)


@attrs.frozen(kw_only=True)
class Synced:
    changes: ChangeSet
    result: ApplyResult


def sync_once(driver: Driver, desired: DesiredState) -> Synced:
    """One observe/diff/apply round."""
    changes = diff(desired, driver.observe())
    return Synced(changes=changes, result=driver.apply(changes))


def nft_script(ns: str, text: str) -> None:
    """Load an nft script (``nft -f -``) inside ``ns``."""
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=text, text=True, check=True, timeout=30)
