"""magw.drivers.heap: malloc_trim where glibc has it, nothing (and no error) elsewhere; and when the nft driver
calls it."""

from __future__ import annotations

import ctypes

import pytest

from magw.desired.nft.values import NftSet, NftTable
from magw.drivers import heap
from magw.drivers.nft import driver as nft_driver
from magw.drivers.nft.driver import NftDriver
from magw.reconcile.changeset import NftChange


def test_gives_back_on_glibc() -> None:
    trimmed: list[int] = []

    class Libc:
        def malloc_trim(self, pad: int) -> int:
            trimmed.append(pad)
            return 1

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ctypes, "CDLL", lambda name: Libc())
        heap.give_back_heap()
    assert trimmed == [0]
    heap.give_back_heap()  # and the real one, on this machine's libc


@pytest.mark.parametrize("error", [OSError("no libc"), AttributeError("malloc_trim")])
def test_nothing_and_no_error_without_malloc_trim(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def cdll(name: object) -> object:
        raise error

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    heap.give_back_heap()


class _StubNft:
    """Takes every command (nothing runs): the driver's own steps around libnftables only."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def run(self, command: str | bytes) -> str:
        self.sizes.append(len(command))
        return ""


def _table(elements: int) -> NftTable:
    nets = tuple(f"{10 + (i >> 16)}.{i >> 8 & 255}.{i & 255}.0/24" for i in range(elements))
    return NftTable(
        family="ip", name="magw", sets=[NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=nets)]
    )


@pytest.mark.parametrize(("elements", "trims"), [(10, 0), (80_000, 1)])
def test_the_nft_driver_hands_the_heap_back_before_large_transactions_only(
    monkeypatch: pytest.MonkeyPatch, elements: int, trims: int
) -> None:
    """A table replace of 80k elements (over 1 MiB in nft syntax) trims first; a small one (events) does not."""
    calls: list[None] = []
    monkeypatch.setattr(nft_driver, "give_back_heap", lambda: calls.append(None))
    stub = _StubNft()
    result = NftDriver(nft=stub).apply([NftChange(family="ip", name="magw", table=_table(elements))])  # type: ignore[arg-type]
    assert result.failed == ()
    assert (len(calls), stub.sizes[0] >= nft_driver.TRIM_BEFORE_BYTES) == (trims, bool(trims))
