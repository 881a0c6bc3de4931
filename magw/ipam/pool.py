"""An address pool: contiguous allocation from one or more CIDRs, reservation and release. Pure.

Rules (docs/globalnet.md):

- the pool is every *host* address of its CIDRs: never a network or broadcast address (a /31 or /32
  has none to skip and is used whole);
- ``allocate(owner, n)`` takes the lowest run of ``n`` contiguous free addresses inside one CIDR;
- ``reserve(owner, addresses)`` takes given addresses, all or nothing; re-reserving addresses the owner
  already holds is fine;
- ``release(owner)`` frees everything the owner holds;
- every error is a value (``Exhausted``, ``OutsideCidr``, ``HeldByOther``), never an exception;
- deterministic: the same calls in the same order give the same addresses.

Shaped for speed: free space is kept as sorted, disjoint runs ``[start, end)`` of integers per CIDR
(``bisect`` to find and split them), so an allocation is O(runs) in the worst case and a reservation or
release O(log runs + addresses), not a scan of every address of a /16.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Hashable, Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.model.netfast import net_key


@attrs.frozen
class Exhausted:
    """No run of ``requested`` contiguous free addresses; ``largest_free`` is the longest run there is."""

    requested: int
    largest_free: int

    def __str__(self) -> str:
        return f"no {self.requested} contiguous free addresses (largest free run: {self.largest_free})"


@attrs.frozen
class OutsideCidr:
    address: IPv4Address

    def __str__(self) -> str:
        return f"{self.address} is not a host address of the pool's CIDRs"


@attrs.frozen
class HeldByOther:
    address: IPv4Address
    holder: Hashable

    def __str__(self) -> str:
        return f"{self.address} is already held by {self.holder}"


IpamError = Exhausted | OutsideCidr | HeldByOther


def host_range(cidr: IPv4Network) -> tuple[int, int]:
    """``[first, end)`` of the host addresses of ``cidr``."""
    first, last = int(cidr.network_address), int(cidr.broadcast_address)
    if cidr.prefixlen >= 31:
        return first, last + 1
    return first + 1, last


class _Free:
    """Sorted disjoint free runs ``[start, end)`` within one CIDR's host range."""

    def __init__(self, start: int, end: int) -> None:
        self.starts: list[int] = [start] if end > start else []
        self.ends: list[int] = [end] if end > start else []

    def take_lowest(self, n: int) -> int | None:
        for i, (start, end) in enumerate(zip(self.starts, self.ends, strict=True)):
            if end - start >= n:
                if end - start == n:
                    del self.starts[i], self.ends[i]
                else:
                    self.starts[i] = start + n
                return start
        return None

    def largest(self) -> int:
        return max((e - s for s, e in zip(self.starts, self.ends, strict=True)), default=0)

    def take(self, address: int) -> None:
        """Remove one free address (it must be free)."""
        i = bisect.bisect_right(self.starts, address) - 1
        start, end = self.starts[i], self.ends[i]
        if start == address and end == address + 1:
            del self.starts[i], self.ends[i]
        elif start == address:
            self.starts[i] = address + 1
        elif end == address + 1:
            self.ends[i] = address
        else:
            self.ends[i] = address
            self.starts.insert(i + 1, address + 1)
            self.ends.insert(i + 1, end)

    def give(self, address: int) -> None:
        """Return one address, merging with its neighbours."""
        i = bisect.bisect_right(self.starts, address)
        merge_left = i > 0 and self.ends[i - 1] == address
        merge_right = i < len(self.starts) and self.starts[i] == address + 1
        if merge_left and merge_right:
            self.ends[i - 1] = self.ends[i]
            del self.starts[i], self.ends[i]
        elif merge_left:
            self.ends[i - 1] = address + 1
        elif merge_right:
            self.starts[i] = address
        else:
            self.starts.insert(i, address)
            self.ends.insert(i, address + 1)


class Pool:
    """The host addresses of ``cidrs`` (overlapping CIDRs are refused with ValueError)."""

    def __init__(self, cidrs: Sequence[IPv4Network]) -> None:
        ordered = sorted(cidrs, key=net_key)
        for a, b in itertools.pairwise(ordered):
            if a.overlaps(b):
                raise ValueError(f"pool CIDRs {a} and {b} overlap")
        self._ranges = [host_range(c) for c in ordered]
        self._range_starts = [r[0] for r in self._ranges]
        self._free = [_Free(s, e) for s, e in self._ranges]
        self._holder: dict[int, Hashable] = {}
        self._held: dict[Hashable, set[int]] = {}
        self.size = sum(e - s for s, e in self._ranges)

    @property
    def used(self) -> int:
        return len(self._holder)

    def _range_of(self, address: int) -> int | None:
        i = bisect.bisect_right(self._range_starts, address) - 1
        if i >= 0 and address < self._ranges[i][1]:
            return i
        return None

    def allocate(self, owner: Hashable, n: int) -> tuple[IPv4Address, ...] | Exhausted:
        """The lowest run of ``n`` (>= 1) contiguous free addresses, now held by ``owner``."""
        if n < 1:
            raise ValueError(f"allocate: n must be >= 1, got {n}")
        for free in self._free:
            start = free.take_lowest(n)
            if start is not None:
                held = self._held.setdefault(owner, set())
                for address in range(start, start + n):
                    self._holder[address] = owner
                    held.add(address)
                return tuple(IPv4Address(a) for a in range(start, start + n))
        return Exhausted(requested=n, largest_free=max((f.largest() for f in self._free), default=0))

    def reserve(self, owner: Hashable, addresses: Iterable[IPv4Address]) -> OutsideCidr | HeldByOther | None:
        """Hold exactly these addresses for ``owner``, all or nothing."""
        wanted = sorted({int(a) for a in addresses})
        for address in wanted:
            if self._range_of(address) is None:
                return OutsideCidr(IPv4Address(address))
            holder = self._holder.get(address)
            if holder is not None and holder != owner:
                return HeldByOther(IPv4Address(address), holder)
        held = self._held.setdefault(owner, set())
        for address in wanted:
            if address in self._holder:
                continue
            index = self._range_of(address)
            assert index is not None
            self._free[index].take(address)
            self._holder[address] = owner
            held.add(address)
        if not held:
            del self._held[owner]
        return None

    def release(self, owner: Hashable) -> tuple[IPv4Address, ...]:
        """Free everything ``owner`` holds; returns what was freed (sorted)."""
        held = sorted(self._held.pop(owner, ()))
        for address in held:
            del self._holder[address]
            index = self._range_of(address)
            assert index is not None
            self._free[index].give(address)
        return tuple(IPv4Address(a) for a in held)

    def holder(self, address: IPv4Address) -> Hashable | None:
        return self._holder.get(int(address))

    def held_by(self, owner: Hashable) -> tuple[IPv4Address, ...]:
        return tuple(IPv4Address(a) for a in sorted(self._held.get(owner, ())))
