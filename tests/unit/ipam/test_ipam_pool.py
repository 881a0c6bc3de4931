"""magw.ipam.pool: contiguous lowest-run allocation, all-or-nothing reservation, release, errors as values.

The property test checks the pool against a deliberately naive model (a list of every host address, scanned
from the lowest) written here from the rules, not from the pool's run bookkeeping.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magw.ipam.pool import Exhausted, HeldByOther, OutsideCidr, Pool


def ip(text: str) -> IPv4Address:
    return IPv4Address(text)


def test_never_network_or_broadcast() -> None:
    """A /29 has 6 host addresses: .1 to .6; the 7th request is exhausted."""
    pool = Pool([IPv4Network("242.0.0.0/29")])
    got = pool.allocate("a", 6)
    assert got == tuple(ip(f"242.0.0.{i}") for i in range(1, 7))
    assert pool.allocate("b", 1) == Exhausted(requested=1, largest_free=0)
    assert pool.size == 6 and pool.used == 6


def test_lowest_contiguous_run_skips_a_gap_too_small() -> None:
    """After .1-.2 and .4 are held, 2 addresses come from .5-.6 (the gap at .3 is too small), 1 from .3."""
    pool = Pool([IPv4Network("242.0.0.0/28")])
    assert pool.reserve("x", [ip("242.0.0.1"), ip("242.0.0.2"), ip("242.0.0.4")]) is None
    assert pool.allocate("a", 2) == (ip("242.0.0.5"), ip("242.0.0.6"))
    assert pool.allocate("b", 1) == (ip("242.0.0.3"),)


def test_reserve_is_all_or_nothing() -> None:
    pool = Pool([IPv4Network("242.0.0.0/28")])
    assert pool.reserve("a", [ip("242.0.0.3")]) is None
    err = pool.reserve("b", [ip("242.0.0.2"), ip("242.0.0.3")])
    assert err == HeldByOther(ip("242.0.0.3"), "a")
    assert pool.holder(ip("242.0.0.2")) is None, "a refused reservation holds nothing"
    assert pool.reserve("b", [ip("242.0.0.0")]) == OutsideCidr(ip("242.0.0.0")), "the network address"
    assert pool.reserve("b", [ip("242.0.0.15")]) == OutsideCidr(ip("242.0.0.15")), "the broadcast address"
    assert pool.reserve("b", [ip("10.0.0.1")]) == OutsideCidr(ip("10.0.0.1"))
    assert pool.reserve("a", [ip("242.0.0.3")]) is None, "re-reserving one's own address is fine"
    assert pool.used == 1


def test_release_frees_everything_and_merges() -> None:
    pool = Pool([IPv4Network("242.0.0.0/29")])
    pool.allocate("a", 2)
    pool.allocate("b", 2)
    pool.allocate("c", 2)
    assert pool.release("b") == (ip("242.0.0.3"), ip("242.0.0.4"))
    assert pool.release("a") == (ip("242.0.0.1"), ip("242.0.0.2"))
    assert pool.allocate("d", 4) == tuple(ip(f"242.0.0.{i}") for i in range(1, 5)), "freed runs merged"
    assert pool.release("nobody") == ()


def test_runs_stay_inside_one_cidr() -> None:
    """Two adjacent /30s have 2 hosts each: a run of 3 does not span them."""
    pool = Pool([IPv4Network("242.0.0.4/30"), IPv4Network("242.0.0.0/30")])
    assert pool.allocate("a", 3) == Exhausted(requested=3, largest_free=2)
    assert pool.allocate("a", 2) == (ip("242.0.0.1"), ip("242.0.0.2"))
    assert pool.allocate("b", 2) == (ip("242.0.0.5"), ip("242.0.0.6"))


def test_overlapping_cidrs_refused() -> None:
    with pytest.raises(ValueError, match="overlap"):
        Pool([IPv4Network("242.0.0.0/16"), IPv4Network("242.0.1.0/24")])


class NaivePool:
    """Every host address in a list; allocation scans from the lowest."""

    def __init__(self, cidrs: list[IPv4Network]) -> None:
        self.ranges = [[int(h) for h in c.hosts()] for c in sorted(cidrs)]
        self.holder: dict[int, str] = {}

    def allocate(self, owner: str, n: int) -> tuple[IPv4Address, ...] | None:
        for hosts in self.ranges:
            for i in range(len(hosts) - n + 1):
                run = hosts[i : i + n]
                if all(a not in self.holder for a in run) and run[-1] - run[0] == n - 1:
                    for a in run:
                        self.holder[a] = owner
                    return tuple(IPv4Address(a) for a in run)
        return None


ops = st.lists(
    st.tuples(st.sampled_from(["alloc", "release", "reserve"]), st.sampled_from("abcdef"), st.integers(1, 5)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_pool_matches_naive_model(steps: list[tuple[str, str, int]]) -> None:
    """Any sequence of operations gives the addresses the naive model gives; no address is held twice."""
    cidrs = [IPv4Network("242.0.0.0/28"), IPv4Network("242.0.1.0/29")]
    pool, model = Pool(cidrs), NaivePool(cidrs)
    for op, owner, n in steps:
        if op == "alloc":
            got = pool.allocate(owner, n)
            want = model.allocate(owner, n)
            assert (None if isinstance(got, Exhausted) else got) == want
        elif op == "release":
            freed = pool.release(owner)
            want_freed = sorted(a for a, o in model.holder.items() if o == owner)
            assert [int(a) for a in freed] == want_freed
            for a in want_freed:
                del model.holder[a]
        else:
            target = IPv4Address(int(cidrs[0].network_address) + n * 2)
            current = model.holder.get(int(target))
            err = pool.reserve(owner, [target])
            if current is None or current == owner:
                assert err is None
                model.holder[int(target)] = owner
            else:
                assert err == HeldByOther(target, current)
        assert pool.used == len(model.holder)
        for a, o in model.holder.items():
            assert pool.holder(IPv4Address(a)) == o
