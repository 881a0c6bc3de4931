"""Observing a table through a terse listing and our own element dumps (``rawobserve``) gives what libnftables'
listing of the table gives: the same ``NftTable``, for every shape of IPv4 set and map the planners make.

The oracle is the driver's other path, ``nft -j list table`` parsed by ``codec`` (nft's own printing of the
kernel's elements); the tables are written by the driver (nft syntax, so nft's own set creation with its
0.0.0.0 end element) and then changed by element batches of ours.
"""

from __future__ import annotations

import itertools

import pytest

from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.nft import NftDriver
from magw.drivers.nft.libnft import Nft
from magw.drivers.nft.nfnl import NfnlSocket
from magw.drivers.nft.rawobserve import observe_raw
from magw.reconcile.changeset import NftChange
from magw.reconcile.diff import nft_changes
from tests.support.nft_backends import daddr, expr, in_set, saddr

pytestmark = pytest.mark.kernel

POST = NftChain(name="postrouting", type="nat", hook="postrouting", priority=100, policy="accept")
CIDRS = (
    "0.0.0.0/8",
    "10.0.0.0/16",
    "10.1.0.0/16",  # adjacent to the one before: two intervals, not merged
    "10.9.0.1-10.9.0.7",
    "10.9.0.8",
    "192.168.1.1",
    "250.0.0.0-255.255.255.255",
)
TABLE = NftTable(
    family="ip",
    name="magw",
    chains=(POST,),
    sets=(
        NftSet(name="cidrs", type="ipv4_addr", flags=("interval",), elements=CIDRS),
        NftSet(name="nodes", type="ipv4_addr", elements=("172.18.0.3", "172.18.0.6")),
        NftSet(name="empty", type="ipv4_addr", flags=("interval",)),
    ),
    maps=(
        NftMap(name="egress", type="ipv4_addr", map="ipv4_addr", elements=(("10.1.0.5", "169.254.1.5"),)),
        NftMap(
            name="ranges",
            type="ipv4_addr",
            map="ipv4_addr",
            flags=("interval",),
            elements=(("10.2.0.0/16", "169.254.2.1"), ("10.3.0.1-10.3.0.9", "169.254.2.2")),
        ),
    ),
    rules=(
        NftRule(chain="postrouting", expr=expr(in_set(saddr(), "nodes"), in_set(daddr(), "cidrs"), {"accept": None})),
    ),
)


def _both(ns: str) -> tuple[NftTable | None, object]:
    with NftDriver(ns, raw_elements=False) as listed, Nft(ns) as nft:
        sock = NfnlSocket(ns)
        try:
            return listed.observe(), observe_raw(nft, sock, "ip", "magw")
        finally:
            sock.close()


def _apply(ns: str, *changes: NftChange) -> None:
    with NftDriver(ns) as driver:
        result = driver.apply(changes)
    assert [f.describe() for f in result.failed] == []


def test_a_table_nft_created_reads_the_same_both_ways(ns: str) -> None:
    _apply(ns, NftChange(family="ip", name="magw", table=TABLE))
    listed, raw = _both(ns)
    assert listed == TABLE
    assert raw == listed


def test_after_element_batches_of_ours_it_still_reads_the_same(ns: str) -> None:
    """Intervals split, widened, removed, added at both ends of the address space; map values changed."""
    _apply(ns, NftChange(family="ip", name="magw", table=TABLE))
    steps = [
        ("0.0.0.0/1", "200.0.0.0/8", "255.255.255.255"),
        ("10.0.0.0/17", "10.0.128.0/17", "10.9.0.1-10.9.0.8", "240.0.0.0/4"),
        (),
        ("0.0.0.0/0",),
    ]
    current = TABLE
    for cidrs, value in zip(steps, itertools.count(7)):
        sets = (NftSet(name="cidrs", type="ipv4_addr", flags=("interval",), elements=cidrs), *TABLE.sets[1:])
        maps = (
            NftMap(name="egress", type="ipv4_addr", map="ipv4_addr", elements=(("10.1.0.5", f"169.254.1.{value}"),)),
            TABLE.maps[1],
        )
        desired = NftTable(family="ip", name="magw", chains=TABLE.chains, rules=TABLE.rules, sets=sets, maps=maps)
        (change,) = nft_changes(desired, current)
        assert change.elements is not None
        _apply(ns, change)
        listed, raw = _both(ns)
        assert listed == desired
        assert raw == listed
        current = desired


def test_a_missing_table_is_none(ns: str) -> None:
    assert _both(ns) == (None, None)


def test_a_table_with_a_verdict_map_is_left_to_libnftables(ns: str) -> None:
    dispatch = NftMap(name="dispatch", type="ipv4_addr", map="verdict", elements=(("10.3.0.1", "accept"),))
    with_verdicts = NftTable(
        family="ip", name="magw", chains=TABLE.chains, rules=TABLE.rules, sets=TABLE.sets, maps=(dispatch,)
    )
    _apply(ns, NftChange(family="ip", name="magw", table=with_verdicts))
    listed, raw = _both(ns)
    assert (listed, raw) == (with_verdicts, False)


def test_a_ruleset_that_keeps_changing_is_left_to_libnftables(ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each read sees another generation: after three tries the caller lists the table itself (one read)."""
    _apply(ns, NftChange(family="ip", name="magw", table=TABLE))
    counter = itertools.count()
    monkeypatch.setattr(NfnlSocket, "generation", lambda self: next(counter))
    _, raw = _both(ns)
    assert raw is False
    assert next(counter) == 6  # two reads per try, three tries
    with NftDriver(ns) as driver:
        assert driver.observe() == TABLE  # the driver falls back to the listing
