"""A whole node in memory: FakeNetlink plus FakeNft behind the Driver protocol."""

from __future__ import annotations

from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.drivers.nft.fake.ruleset import FakeNft
from magw.drivers.node import NodeDriver


def fake_node_driver(netlink: FakeNetlink | None = None, nft: FakeNft | None = None) -> NodeDriver:
    """A NodeDriver over fresh fakes (or the ones given, e.g. pre-loaded with foreign state)."""
    return NodeDriver(
        netlink=netlink if netlink is not None else FakeNetlink(), nft=nft if nft is not None else FakeNft()
    )
