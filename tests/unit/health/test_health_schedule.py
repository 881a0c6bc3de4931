"""The send schedule (``magw.health.schedule``): due targets come out earliest first, once; a rescheduled or
dropped target's old time never surfaces; a held target wakes nobody until it is released."""

from __future__ import annotations

import random
from ipaddress import IPv4Address

from magw.health.schedule import SendSchedule

A, B, C = IPv4Address("241.1.0.1"), IPv4Address("241.1.0.2"), IPv4Address("241.1.0.3")


def test_due_targets_come_out_earliest_first_and_only_once() -> None:
    s = SendSchedule()
    s.set(B, 0.2)
    s.set(A, 0.1)
    s.set(C, 0.5)
    s.set(A, 0.1)  # the same time twice: still one entry out
    assert s.earliest() == 0.1
    assert s.pop_due(0.05) == []
    assert s.pop_due(0.3) == [A, B]
    assert s.pop_due(0.3) == []  # popped: out until set again
    assert s.earliest() == 0.5


def test_a_rescheduled_or_dropped_target_keeps_only_its_new_time() -> None:
    s = SendSchedule()
    s.set(A, 0.1)
    s.set(B, 0.2)
    s.set(A, 0.4)  # later (the next interval)
    s.set(B, 0.05)  # earlier (the fast interval after a miss)
    assert s.pop_due(0.3) == [B]
    s.keep([B])
    assert s.get(A) is None and s.pop_due(1.0) == []
    assert s.earliest() is None


def test_a_held_target_is_out_until_released_at_its_old_time() -> None:
    s = SendSchedule()
    s.set(A, 0.1)
    s.set(B, 0.3)
    assert s.pop_due(0.1) == [A]
    s.hold(A)  # due, but its probe is still in flight
    assert s.earliest() == 0.3 and s.held == {A}
    s.release(A)
    assert s.held == frozenset() and s.earliest() == 0.1
    assert s.pop_due(0.2) == [A]
    s.release(B)  # not held: nothing happens
    assert s.pop_due(0.3) == [B]


def test_against_a_plain_dict_scan_over_random_operations() -> None:
    """The heap gives what a scan over every target's time gives (the old monitor's loop), whatever the order
    of sets, pops and keeps (an independent oracle: a dict and a sort)."""
    rng = random.Random(7)
    addrs = [IPv4Address(f"241.2.0.{i}") for i in range(1, 20)]
    s, due, out = SendSchedule(), {}, set()  # out: popped and not set again (the oracle's view of the heap)
    now = 0.0
    for _ in range(3000):
        op = rng.random()
        a = rng.choice(addrs)
        if op < 0.5:
            t = round(now + rng.random(), 3)
            s.set(a, t)
            due[a], _ = t, out.discard(a)
        elif op < 0.9:
            now = round(now + rng.random() * 0.2, 3)
            expected = {x for x, t in due.items() if t <= now and x not in out}
            got = s.pop_due(now)
            assert set(got) == expected and len(got) == len(expected)
            assert [due[x] for x in got] == sorted(due[x] for x in got)  # earliest first (ties in any order)
            out |= set(got)
        else:
            keep = set(rng.sample(addrs, 12))
            s.keep(keep)
            due = {x: t for x, t in due.items() if x in keep}
            out &= keep
        pending = [t for x, t in due.items() if x not in out]
        assert s.earliest() == (min(pending) if pending else None)
