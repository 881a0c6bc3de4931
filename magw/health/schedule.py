"""When each probe target is next due: a dict of due times and a heap over it. Pure.

Shaped for speed (``benchmarks/probe_cost.py``): the monitor's tick used to look at every target to find the due
ones and the next wake time, O(targets) per tick with a tick per send and per reply, so O(targets^2) per second:
at 100 remote gateways that loop and the ``IPv4Address`` hashes in it were most of the prober's 40% of a core.
Here a tick pops only what is due, O(log n) each. The dict is the truth; a heap entry whose time no longer
matches it (the target was rescheduled or dropped) is skipped when it surfaces (lazy deletion).

A due target whose probe is still in flight is *held*: taken out of the heap until its outcome is known
(``release``), so it neither wakes the loop nor gets a second probe before its deadline.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from ipaddress import IPv4Address


class SendSchedule:
    def __init__(self) -> None:
        self._due: dict[IPv4Address, float] = {}
        self._heap: list[tuple[float, int, IPv4Address]] = []
        self._count = 0  # a tie-breaker: never compare addresses in the heap
        self._held: set[IPv4Address] = set()

    def get(self, address: IPv4Address) -> float | None:
        return self._due.get(address)

    def set(self, address: IPv4Address, due: float) -> None:
        """``address`` is next due at ``due`` (any earlier or later time it had is forgotten)."""
        self._due[address] = due
        self._held.discard(address)
        self._push(address, due)

    def keep(self, addresses: Iterable[IPv4Address]) -> None:
        """Forget every target not in ``addresses``."""
        wanted = set(addresses)
        self._due = {a: t for a, t in self._due.items() if a in wanted}
        self._held &= wanted
        self._heap = [(t, i, a) for t, i, a in self._heap if self._due.get(a) == t and a not in self._held]
        heapq.heapify(self._heap)

    def pop_due(self, now: float) -> list[IPv4Address]:
        """The targets due at ``now`` (their time <= now), earliest first, out of the heap until ``set`` or
        ``hold``/``release`` puts them back."""
        out: list[IPv4Address] = []
        seen: set[IPv4Address] = set()  # the same time set twice leaves two valid entries
        while self._heap and self._heap[0][0] <= now:
            due, _i, address = heapq.heappop(self._heap)
            if self._due.get(address) == due and address not in self._held and address not in seen:
                seen.add(address)
                out.append(address)
        return out

    def hold(self, address: IPv4Address) -> None:
        """``address`` was due but its probe is in flight: out of the heap until ``release``."""
        self._held.add(address)

    @property
    def held(self) -> frozenset[IPv4Address]:
        return frozenset(self._held)

    def release(self, address: IPv4Address) -> None:
        """Its probe's outcome is known: due again at its (past) time."""
        if address in self._held:
            self._held.discard(address)
            due = self._due.get(address)
            if due is not None:
                self._push(address, due)

    def earliest(self) -> float | None:
        """The earliest time a target not held is due (None: none)."""
        while self._heap:
            due, _i, address = self._heap[0]
            if self._due.get(address) == due and address not in self._held:
                return due
            heapq.heappop(self._heap)
        return None

    def _push(self, address: IPv4Address, due: float) -> None:
        self._count += 1
        heapq.heappush(self._heap, (due, self._count, address))
