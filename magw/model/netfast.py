"""``IPv4Network`` objects built from integers without ``ipaddress``'s parsing (docs/performance.md).

Shaped for speed: a 100k-CIDR snapshot builds 100k networks when it is loaded (and ``magw apply`` again
when it observes 100k routes). ``IPv4Network((ip, prefixlen))`` splits, type-checks and re-validates its
argument in Python, about 2.7 us a network on this machine; filling a new object's attributes directly
is about 0.8 us. The objects are the same: ``network()`` is used only after ``SAME_AS_IPADDRESS`` found,
when this module was imported, that the direct way gives objects equal to ``ipaddress``'s own in type,
attributes, comparison, hash and text for every prefix length it covers; on any Python whose
``ipaddress`` keeps other attributes, it builds them the ordinary way. /31 and /32 always take the
ordinary way (``ipaddress`` gives them their own ``hosts``).
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network
from typing import Any

_FAST_MAX_PREFIXLEN = 30
_ALL_ONES = 0xFFFFFFFF
_new = object.__new__
_make_netmask = IPv4Network._make_netmask  # type: ignore[attr-defined]  # cached by prefix length in ipaddress itself
_HOST_MASKS = tuple(_ALL_ONES >> prefixlen for prefixlen in range(_FAST_MAX_PREFIXLEN + 1))


def _direct(ip: int, prefixlen: int) -> IPv4Network:
    """The attributes ``IPv4Network.__init__`` sets for a valid ``(ip, prefixlen)``, set directly."""
    # ``Any``: the attributes below are private to ipaddress (or read-only properties) in typeshed.
    address: Any = _new(IPv4Address)
    address._ip = ip  # what IPv4Address(int) stores after its checks
    net: Any = _new(IPv4Network)
    net.network_address = address  # a plain attribute at run time (a read-only property to typeshed)
    net.netmask, net._prefixlen = _make_netmask(prefixlen)
    built: IPv4Network = net
    return built


def _same(ours: IPv4Network, theirs: IPv4Network) -> bool:
    return (
        type(ours) is type(theirs)
        and vars(ours) == vars(theirs)
        and ours == theirs
        and hash(ours) == hash(theirs)
        and str(ours) == str(theirs)
        and ours.broadcast_address == theirs.broadcast_address
        and type(ours.network_address) is type(theirs.network_address)
    )


def _self_check() -> bool:
    """True when ``_direct`` builds what ``IPv4Network((ip, prefixlen))`` builds, for every length it serves."""
    for prefixlen in range(_FAST_MAX_PREFIXLEN + 1):
        mask = (_ALL_ONES << (32 - prefixlen)) & _ALL_ONES
        for ip in (0, 0x0A000000 & mask, 0xC0A80100 & mask, _ALL_ONES & mask):
            try:
                if not _same(_direct(ip, prefixlen), IPv4Network((ip, prefixlen))):
                    return False
            except (AttributeError, TypeError, ValueError):
                return False
    return True


SAME_AS_IPADDRESS = _self_check()


def network(ip: int, prefixlen: int) -> IPv4Network:
    """``IPv4Network((ip, prefixlen))``, strict: ValueError for an address or length out of range or host bits set."""
    fast = SAME_AS_IPADDRESS and 0 <= prefixlen <= _FAST_MAX_PREFIXLEN and 0 <= ip <= _ALL_ONES
    if fast and not ip & _HOST_MASKS[prefixlen]:  # _HOST_MASKS indexed only once the length is known in range
        return _direct(ip, prefixlen)
    return IPv4Network((ip, prefixlen))  # the ordinary way, and ipaddress's own error for bad input


def _key_by_value(net: IPv4Network) -> tuple[int, int]:
    """``(int(network_address), prefixlen)`` through ipaddress's public API."""
    return (int(net.network_address), net.prefixlen)


def _key_by_attributes(net: IPv4Network) -> tuple[int, int]:
    # The attributes behind ``int(network_address)`` and ``prefixlen`` (each a Python call in ipaddress), read
    # directly: used only when _key_check() found them to be exactly that.
    found: Any = net
    return (found.network_address._ip, found._prefixlen)


def _key_check() -> bool:
    """True when ``_key_by_attributes`` gives ``_key_by_value``'s key, for networks built either way."""
    for prefixlen in range(33):
        mask = (_ALL_ONES << (32 - prefixlen)) & _ALL_ONES
        for ip in (0, 0x0A000000 & mask, _ALL_ONES & mask):
            for net in (IPv4Network((ip, prefixlen)), network(ip, prefixlen)):
                try:
                    by_attributes = _key_by_attributes(net)
                except AttributeError:
                    return False
                if by_attributes != _key_by_value(net) or not all(type(k) is int for k in by_attributes):
                    return False
    return True


KEY_BY_ATTRIBUTES = _key_check()


# ``net_key(net)``: ``(network as int, prefixlen)``, which sorts exactly as ``IPv4Network`` objects compare but on
# integers (docs/performance.md): ``IPv4Network.__lt__``, ``__eq__`` and ``__hash__`` are Python code, about 1 us each,
# and sorting 100k networks through them was seconds of ``magw plan``; a tuple of two ints compares and hashes in C.
# Read from the attributes behind ``int(network_address)`` and ``prefixlen`` (each a Python call in ipaddress)
# when the import-time check says they are the same: a 100k-CIDR snapshot computes about 300k keys while it is
# loaded and planned.
net_key: Callable[[IPv4Network], tuple[int, int]] = _key_by_attributes if KEY_BY_ATTRIBUTES else _key_by_value
