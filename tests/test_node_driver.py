"""NodeDriver (magw.drivers.node): one observe over both halves, nft listed before the netlink dump."""

from __future__ import annotations

from collections.abc import Sequence

from magw.desired.nft import NftTable
from magw.desired.state import DesiredState
from magw.drivers.node import NodeDriver
from magw.reconcile.changeset import ChangeSet, NftChange
from magw.reconcile.driver import ApplyResult


class _Netlink:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def observe(self) -> DesiredState:
        self.calls.append("netlink")
        return DesiredState()

    def apply(self, changes: ChangeSet) -> ApplyResult:
        return ApplyResult()


class _Nft:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def observe(self) -> NftTable | None:
        self.calls.append("nft")
        return NftTable(family="ip", name="magw")

    def apply(self, changes: Sequence[NftChange]) -> ApplyResult:
        return ApplyResult()


def test_observe_lists_nft_before_dumping_routes() -> None:
    """The nft listing (libnftables' own ~150 MB peak at 100k elements) comes before the 100k observed routes
    exist, and its table lands in the observed state's ``nft``."""
    calls: list[str] = []
    state = NodeDriver(netlink=_Netlink(calls), nft=_Nft(calls)).observe()
    assert calls == ["nft", "netlink"]
    assert state.nft == NftTable(family="ip", name="magw")
