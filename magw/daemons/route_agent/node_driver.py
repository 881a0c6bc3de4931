"""The route agent's node driver: real (netlink + nftables in the current namespace) or fake.

The real drivers are imported and built lazily, on first use, by the thread that
uses them: the reconciler runs every driver call in its one worker thread, and
pyroute2 0.9's sync IPRoute binds to the event loop of the thread that created
it (created inside the running asyncio loop it fails with "This event loop is
already running"). Lazy imports also keep ``--fake`` free of pyroute2 and
libnftables.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from magw.desired.state import DesiredState
from magw.reconcile.changeset import ChangeSet
from magw.reconcile.driver import ApplyResult, Driver

log = structlog.get_logger(__name__)


class LazyDriver:
    """A Driver built by ``factory`` at the first observe/apply, in the calling thread."""

    def __init__(self, factory: Callable[[], Driver], *, what: str) -> None:
        self._factory = factory
        self._what = what
        self._driver: Driver | None = None
        self._lock = threading.Lock()

    def _get(self) -> Driver:
        with self._lock:
            if self._driver is None:
                self._driver = self._factory()
                log.info("route_agent.driver_ready", driver=self._what)
            return self._driver

    def observe(self) -> DesiredState:
        return self._get().observe()

    def apply(self, changes: ChangeSet) -> ApplyResult:
        return self._get().apply(changes)


def real_node_driver() -> Driver:
    """NetlinkDriver + NftDriver on the current network namespace."""
    from magw.drivers.netlink.driver import NetlinkDriver
    from magw.drivers.nft.driver import NftDriver
    from magw.drivers.node import NodeDriver

    return NodeDriver(netlink=NetlinkDriver(None), nft=NftDriver(None))


def fake_driver() -> Driver:
    """The in-memory node (FakeNetlink + FakeNft). It holds no CNI address, so the prefsrc check is off."""
    from magw.drivers.fake_node import fake_node_driver
    from magw.drivers.netlink.fake.namespace import FakeNetlink

    return fake_node_driver(netlink=FakeNetlink(check_prefsrc=False))
