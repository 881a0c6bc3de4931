"""NodeDriver (magw.drivers.node): one observe over both halves, nft listed before the netlink dump."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from magw.desired.nft.values import NftTable
from magw.desired.state import DesiredState, Link
from magw.drivers.node import NodeDriver
from magw.reconcile.changeset import ChangeSet, NftChange, Op
from magw.reconcile.driver import ApplyResult, Failure


class _Netlink:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def observe(self) -> DesiredState:
        self.calls.append("netlink")
        return DesiredState()

    def apply(self, changes: ChangeSet) -> ApplyResult:
        return ApplyResult()


class _Nft:
    tables = (("ip", "magw"), ("ip", "magw-egress"))

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def observe_all(self) -> tuple[NftTable, ...]:
        self.calls.append("nft")
        return (NftTable(family="ip", name="magw-egress"), NftTable(family="ip", name="magw"))

    def apply(self, changes: Sequence[NftChange]) -> ApplyResult:
        return ApplyResult()


def test_observe_lists_nft_before_dumping_routes() -> None:
    """The nft listing (libnftables' own ~150 MB peak at 100k elements) comes before the 100k observed routes
    exist; ``ip magw`` lands in the observed state's ``nft``, any other table of ours in ``extra_nft``."""
    calls: list[str] = []
    state = NodeDriver(netlink=_Netlink(calls), nft=_Nft(calls)).observe()
    assert calls == ["nft", "netlink"]
    assert state.nft == NftTable(family="ip", name="magw")
    assert state.extra_nft == (NftTable(family="ip", name="magw-egress"),)


_LINK = Link(name="vx-test", vni=100, port=4800, mtu=1450, mac="02:00:00:00:00:01")
_CHANGES = ChangeSet(
    ops=(Op(verb="create", kind="links", obj=_LINK),),
    nft=(NftChange(family="ip", name="magw", table=NftTable(family="ip", name="magw")),),
)


class _WaitsForNft(_Netlink):
    """A netlink half whose apply succeeds only if the nft half's apply runs meanwhile (bounded wait)."""

    def __init__(self, nft_started: threading.Event) -> None:
        super().__init__([])
        self.nft_started = nft_started

    def apply(self, changes: ChangeSet) -> ApplyResult:
        if not self.nft_started.wait(timeout=10):
            return ApplyResult(failed=tuple(Failure(op=op, error="nft did not run meanwhile") for op in changes.ops))
        return ApplyResult(applied=changes.ops)


class _SignalsNft(_Nft):
    def __init__(self, nft_started: threading.Event, *, raises: bool = False) -> None:
        super().__init__([])
        self.nft_started = nft_started
        self.raises = raises
        self.thread = ""

    def apply(self, changes: Sequence[NftChange]) -> ApplyResult:
        self.thread = threading.current_thread().name
        self.nft_started.set()
        if self.raises:
            raise RuntimeError("libnftables crashed")
        return ApplyResult(applied=tuple(changes))


def test_apply_runs_the_nft_transaction_while_netlink_works() -> None:
    """With both netlink ops and nft changes, the nft half runs in another thread during the netlink half;
    the result holds both, netlink first, as the sequential apply reported them."""
    started = threading.Event()
    nft = _SignalsNft(started)
    result = NodeDriver(netlink=_WaitsForNft(started), nft=nft).apply(_CHANGES)
    assert result.failed == ()
    assert result.applied == (*_CHANGES.ops, *_CHANGES.nft)
    assert nft.thread != threading.current_thread().name


def test_an_nft_exception_is_raised_after_netlink_finished() -> None:
    """An exception in the nft thread reaches the caller, and only once the netlink half has run to its end."""
    started = threading.Event()
    netlink_calls: list[str] = []

    class _Recording(_WaitsForNft):
        def apply(self, changes: ChangeSet) -> ApplyResult:
            result = super().apply(changes)
            netlink_calls.append("done")
            return result

    with pytest.raises(RuntimeError, match="libnftables crashed"):
        NodeDriver(netlink=_Recording(started), nft=_SignalsNft(started, raises=True)).apply(_CHANGES)
    assert netlink_calls == ["done"]


def test_begin_apply_starts_nft_now_and_leaves_netlink_to_finish() -> None:
    """``begin_apply`` starts the nft half at once (in its thread); the netlink half waits for ``finish``, which
    returns the same merged result as ``apply``."""
    started = threading.Event()
    calls: list[str] = []

    class _Counting(_Netlink):
        def apply(self, changes: ChangeSet) -> ApplyResult:
            calls.append("netlink")
            return ApplyResult(applied=changes.ops)

    finish = NodeDriver(netlink=_Counting([]), nft=_SignalsNft(started)).begin_apply(_CHANGES)
    assert started.wait(timeout=10)
    assert calls == []
    assert finish().applied == (*_CHANGES.ops, *_CHANGES.nft)
    assert calls == ["netlink"]
