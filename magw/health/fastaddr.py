"""An IPv4Address that hashes once. Pure.

Shaped for speed (``benchmarks/probe_cost.py``, cProfile at 100 remote gateways and a 30 ms interval):
``ipaddress`` computes ``hash(hex(int(ip)))`` on every hash, about 1 us, and a probe's send and reply look its
peer up in some 29 dicts and sets keyed by the address or by (address, echo id): a fifth of the prober's time
went to ``IPv4Address.__hash__``. The probe targets' addresses and the replies' (``magw.health.probe``) are
``FastAddress``es: equal to, and hashing like, the plain ``IPv4Address`` of the same value, so either finds the
other in a dict.
"""

from __future__ import annotations

from ipaddress import IPv4Address


class FastAddress(IPv4Address):
    __slots__ = ("_hash",)

    def __init__(self, address: object) -> None:
        super().__init__(address)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash
