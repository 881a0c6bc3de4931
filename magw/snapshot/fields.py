"""Typed readers for the fields of a snapshot document, with one-line errors.

Every reader takes the raw value PyYAML produced and the field path it came from
(``clusters[1].pod_cidrs[0]``) and either returns a checked Python value or raises
``FieldError(path, reason)``. ``magw.snapshot.load`` turns that into a ``SnapshotError``
that also names the file.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from ipaddress import AddressValueError, IPv4Address, IPv4Network, NetmaskValueError
from socket import inet_aton

from magw.model.netfast import network

_SHOW_MAX = 60


class FieldError(Exception):
    """A bad field: ``path`` is where it is in the document, ``reason`` says what is wrong (one line)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def key_path(path: str, key: str) -> str:
    """``clusters[0]`` + ``id`` -> ``clusters[0].id``."""
    return f"{path}.{key}" if path else key


def item_path(path: str, index: int) -> str:
    """``clusters`` + 1 -> ``clusters[1]``."""
    return f"{path}[{index}]"


def kind(value: object) -> str:
    """The YAML name of a value's type, for "expected X, got Y" messages."""
    if value is None:
        return "null"
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping"}
    return names.get(type(value), type(value).__name__)


def show(value: object) -> str:
    """A short one-line rendering of a value (``repr``, cut at 60 characters)."""
    text = repr(value)
    return text if len(text) <= _SHOW_MAX else text[: _SHOW_MAX - 3] + "..."


def _got(value: object) -> str:
    return kind(value) if value is None or isinstance(value, list | dict) else f"{kind(value)} {show(value)}"


class Fields:
    """A mapping of the document whose keys are checked against the keys it may have.

    ``allowed=None`` admits any string key (``health.reach`` is keyed by hostname).
    """

    def __init__(self, value: object, path: str, allowed: Collection[str] | None) -> None:
        if not isinstance(value, dict):
            raise FieldError(path, f"expected a mapping, got {_got(value)}")
        for key in value:
            if not isinstance(key, str):
                raise FieldError(path, f"keys must be strings, got {_got(key)}")
            if allowed is not None and key not in allowed:
                raise FieldError(key_path(path, key), _unknown_key(key, allowed))
        self._value: dict[str, object] = value
        self.path = path

    def names(self) -> list[str]:
        """The keys, in document order."""
        return list(self._value)

    def at(self, key: str) -> str:
        """The path of field ``key``."""
        return key_path(self.path, key)

    def has(self, key: str) -> bool:
        """True when ``key`` is present with a non-null value."""
        return self._value.get(key) is not None

    def required(self, key: str) -> object:
        if key not in self._value:
            raise FieldError(self.at(key), "missing required field")
        return self._value[key]

    def optional(self, key: str) -> object:
        """The value of ``key``, or None when it is absent or null."""
        return self._value.get(key)


def _unknown_key(key: str, allowed: Collection[str]) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1)
    if close:
        return f"unknown key, did you mean {close[0]!r}?"
    return f"unknown key (allowed: {', '.join(sorted(allowed))})"


def string(value: object, path: str) -> str:
    """A non-empty string."""
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {_got(value)}")
    if not value.strip():
        raise FieldError(path, "must not be empty")
    return value


def boolean(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise FieldError(path, f"expected a boolean (true/false), got {_got(value)}")
    return value


def integer(value: object, path: str, *, low: int, high: int) -> int:
    """An integer in ``low..high`` (inclusive). Booleans are not integers here."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise FieldError(path, f"expected an integer, got {_got(value)}")
    if not low <= value <= high:
        raise FieldError(path, f"{value} is out of range {low}..{high}")
    return value


def sequence(value: object, path: str) -> list[object]:
    if not isinstance(value, list):
        raise FieldError(path, f"expected a list, got {_got(value)}")
    return value


def ipv4(value: object, path: str) -> IPv4Address:
    """A dotted-quad IPv4 address (leading zeros are refused, as ``ipaddress`` does)."""
    if not isinstance(value, str):
        raise FieldError(path, f"expected an IPv4 address string, got {_got(value)}")
    try:
        return IPv4Address(value)
    except AddressValueError:
        raise FieldError(path, f"{show(value)} is not an IPv4 address") from None


# A CIDR already in canonical ``a.b.c.d/len`` form: octets and length without leading zeros.
_OCTET = r"(?:0|[1-9][0-9]{0,2})"
_CANONICAL_CIDR = re.compile(rf"({_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET})/([0-9]|[12][0-9]|3[0-2])")


def _canonical_cidr(value: object) -> IPv4Network | None:
    """``value`` as a network when it is a canonical CIDR with no host bits; None for anything ``cidr`` must word."""
    if not isinstance(value, str):
        return None
    match = _CANONICAL_CIDR.fullmatch(value)
    if match is None:
        return None
    addr, length_text = match.groups()
    try:
        return network(int.from_bytes(inet_aton(addr), "big"), int(length_text))
    except (OSError, ValueError):
        return None  # an octet above 255 (inet_aton) or host bits set (network, strict): the careful path words it


def cidr(value: object, path: str) -> IPv4Network:
    """An IPv4 network written ``a.b.c.d/len`` with no host bits set.

    Shaped for speed (docs/performance.md): parsing every CIDR twice through ``ipaddress`` strings was about
    half the load time of a 100k-CIDR snapshot. A value in canonical form with no host bits is
    checked with one regex, its address read by ``inet_aton`` (C; it refuses an octet above 255) and the
    network built from ``(int, prefixlen)`` (``magw.model.netfast``, a third of ``IPv4Network((ip, prefixlen))``);
    anything else, host bits set included, takes the careful path below, which words the error.
    """
    fast = _canonical_cidr(value)
    if fast is not None:
        return fast
    if not isinstance(value, str):
        raise FieldError(path, f"expected an IPv4 CIDR string, got {_got(value)}")
    if "/" not in value:
        raise FieldError(path, f"{show(value)} is not an IPv4 CIDR (missing /prefix)")
    try:
        loose = IPv4Network(value, strict=False)
    except (AddressValueError, NetmaskValueError, ValueError):
        raise FieldError(path, f"{show(value)} is not an IPv4 CIDR") from None
    if IPv4Address(value.split("/", 1)[0]) != loose.network_address:
        raise FieldError(path, f"{show(value)} has host bits set (the network is {loose})")
    if str(loose) != value:
        raise FieldError(path, f"{show(value)} is not in a.b.c.d/len form (write {loose})")
    return loose


def cidr_list(value: object, path: str) -> list[IPv4Network]:
    """Each item by ``cidr``; an item's path (``pod_cidrs[7]``) is only written for an item that needs words
    (docs/performance.md: one path string per CIDR was built for nothing at 100k CIDRs)."""
    found: list[IPv4Network] = []
    for i, item in enumerate(sequence(value, path)):
        net = _canonical_cidr(item)
        found.append(net if net is not None else cidr(item, item_path(path, i)))
    return found


def string_list(value: object, path: str) -> list[str]:
    return [string(item, item_path(path, i)) for i, item in enumerate(sequence(value, path))]
