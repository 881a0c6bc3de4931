"""Set and map elements: our strings <-> libnftables JSON, validated and in the kernel's canonical form.

Our strings (``magw.desired.nft.values``): ``10.1.1.1``, ``10.1.0.0/16``, ``10.0.0.1-10.0.0.9``,
``4500``, ``1000-2000``, ``eth0``, ``02:53:f0:12:00:06``, concatenations joined by
`` . `` (``10.0.0.1 . 80``), and verdicts as map values (``accept``, ``drop``,
``continue``, ``return``, ``jump CHAIN``, ``goto CHAIN``).

``canonical`` returns what nft 1.0.6 prints back for an element, so the fake
stores what the kernel would, and a desired table written non-canonically is
refused with a clear message instead of being replaced on every sync. Measured
on nft 1.0.6 / kernel 6.18: a prefix with host bits is masked (``10.1.0.1/16`` ->
``10.1.0.0/16``), a /32 prints as the address, a range that is exactly one prefix
prints as the prefix, ``a-a`` prints as ``a``, MACs print in lower case, marks
print as decimal in JSON.

We validate before libnftables sees an element: nft resolves an unparsable
``ipv4_addr`` element as a HOST NAME (a DNS lookup from the driver) and an
unknown ``inet_service`` as a service name.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
import socket
from collections.abc import Iterable
from typing import Any

from magw.model import dotted

SCALAR_TYPES = ("ipv4_addr", "ipv6_addr", "inet_service", "mark", "ifname", "ether_addr")
VALUE_TYPES = (*SCALAR_TYPES, "verdict")
_INT_BITS = {"inet_service": 16, "mark": 32}
_IP_VERSION = {"ipv4_addr": 4, "ipv6_addr": 6}
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@+*-]{1,15}$")
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_PLAIN_VERDICTS = ("accept", "drop", "continue", "return")
_CHAIN_VERDICTS = ("jump", "goto")
CONCAT_SEP = " . "


class ElementError(ValueError):
    """An element or datatype nft would refuse (or misread); one line naming the element and the reason."""


@functools.lru_cache(maxsize=64)  # called once per element: 100k calls at 100k routes
def split_type(type_: str, *, allow_verdict: bool = False) -> tuple[str, ...]:
    """The component datatypes of ``type_`` (``ipv4_addr . inet_service`` -> two); raises for unknown ones."""
    parts = tuple(p.strip() for p in type_.split(" . "))
    allowed = VALUE_TYPES if allow_verdict else SCALAR_TYPES
    for part in parts:
        if part not in allowed:
            raise ElementError(f"datatype {part!r} is not supported (supported: {', '.join(allowed)})")
    if "verdict" in parts and len(parts) > 1:
        raise ElementError(f"datatype {type_!r}: a verdict cannot be part of a concatenation")
    return parts


def type_to_json(type_: str) -> str | list[str]:
    """``ipv4_addr`` stays a string; a concatenation becomes libnftables' list form."""
    parts = split_type(type_, allow_verdict=True)
    return parts[0] if len(parts) == 1 else list(parts)


def type_from_json(value: Any) -> str:
    return CONCAT_SEP.join(value) if isinstance(value, list) else str(value)


# ---- one component ------------------------------------------------------------------------------------------


def _ip(text: str, version: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        raise ElementError(f"{text!r} is not an IPv{version} address") from None
    if addr.version != version:
        raise ElementError(f"{text!r} is not an IPv{version} address")
    return addr


# An IPv4 address or prefix in canonical text (octets 0-255 without leading zeros), for the fast path of _ip_bounds.
_V4_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_V4_TEXT = re.compile(rf"({_V4_OCTET}\.{_V4_OCTET}\.{_V4_OCTET}\.{_V4_OCTET})(?:/([0-9]|[12][0-9]|3[0-2]))?")


def _v4_bounds(text: str, interval: bool) -> tuple[int, int] | None:
    """The span of a canonical IPv4 address or aligned prefix on ints; None sends it to the careful path.

    Shaped for speed (docs/performance.md): ``ipaddress`` parsing was most of ``magw apply``'s time at 100k set
    elements, and then the per-octet ``int`` calls were: the regex bounds the octets, ``inet_aton`` packs them in C.
    """
    match = _V4_TEXT.fullmatch(text)
    if match is None:
        return None
    addr, length = match.groups()
    ip = int.from_bytes(socket.inet_aton(addr), "big")
    if length is None:
        return ip, ip
    size = 1 << (32 - int(length))
    if not interval or ip & (size - 1):
        return None  # the careful path words the error, or masks the host bits as nft does
    return ip, ip + size - 1


def _v4_prefix_len(text: str, interval: bool) -> int | None:
    """The prefix length of ``text`` when it is already canonical IPv4 (-1: a plain address), else None.

    The one check per set element on the hot path (docs/performance.md): 100k elements went through five calls each.
    """
    match = _V4_TEXT.fullmatch(text)
    if match is None:
        return None
    addr, length = match.groups()
    if length is None:
        return -1
    n = int(length)
    if not interval or n == 32 or int.from_bytes(socket.inet_aton(addr), "big") & ((1 << (32 - n)) - 1):
        return None  # the careful path: a /32 prints as the address, host bits are masked or refused
    return n


# The canonical text of each prefix length a set element may carry (a /32 prints as the address), with its host mask.
_V4_LENGTH_MASKS = {str(n): (1 << (32 - n)) - 1 for n in range(32)}


def all_canonical_v4(texts: tuple[str, ...], interval: bool) -> bool:
    """True when every ``ipv4_addr`` element in ``texts`` is already canonical (``canonical(t) == t`` for each).

    False says only "look closer": the caller checks element by element and words the errors. Shaped for speed
    (docs/performance.md): a few C calls per element (``inet_aton`` and ``inet_ntoa`` give back the very text only for a
    canonical dotted quad), where the element-by-element check of a 100k-element set was 0.4 s of the nft
    thread of ``magw apply``, and a regex over the joined text still 0.13 s.
    """
    aton, ntoa, from_bytes, masks = socket.inet_aton, socket.inet_ntoa, int.from_bytes, _V4_LENGTH_MASKS
    for text in texts:
        addr, slash, length = text.partition("/")
        if not slash:
            mask = 0
        elif not interval or (mask := masks.get(length, -1)) < 0:
            return False  # a prefix outside an interval set, or a length that is not 0-31 as nft prints it
        try:
            packed = aton(addr)
        except OSError:
            return False
        if ntoa(packed) != addr or from_bytes(packed, "big") & mask:
            return False  # not a canonical dotted quad (leading zeros, short forms, trailing text), or host bits
    return True


def _v4_text(lo: int, hi: int) -> str:
    """What the careful path prints for the IPv4 span lo..hi: an address, one aligned prefix, or a range."""
    first = dotted(lo)
    size = hi - lo + 1
    if size == 1:
        return first
    if size & (size - 1) == 0 and lo & (size - 1) == 0:
        return f"{first}/{33 - size.bit_length()}"
    return f"{first}-{dotted(hi)}"


def _ip_bounds(text: str, version: int, interval: bool) -> tuple[int, int]:
    if version == 4:
        fast = _v4_bounds(text, interval)
        if fast is not None:
            return fast
    if "/" in text or "-" in text:
        if not interval:
            raise ElementError(f"{text!r}: prefixes and ranges need a set with flags interval")
        if "/" in text:
            try:
                net = ipaddress.ip_network(text, strict=False)
            except ValueError:
                raise ElementError(f"{text!r} is not an IPv{version} prefix") from None
            if net.version != version:
                raise ElementError(f"{text!r} is not an IPv{version} prefix")
            return int(net.network_address), int(net.broadcast_address)
        lo_text, hi_text = text.split("-", 1)
        lo, hi = int(_ip(lo_text, version)), int(_ip(hi_text, version))
        if lo > hi:
            raise ElementError(f"{text!r}: range start is above its end")
        return lo, hi
    value = int(_ip(text, version))
    return value, value


def _canonical_ip(text: str, version: int, interval: bool) -> str:
    if version == 4 and _v4_bounds(text, interval) is not None and not text.endswith("/32"):
        return text  # the fast path accepts only canonical text; nft prints a /32 as the address
    lo, hi = _ip_bounds(text, version, interval)
    if version == 4:
        return _v4_text(lo, hi)
    cls = ipaddress.IPv4Address if version == 4 else ipaddress.IPv6Address
    first, last = cls(lo), cls(hi)
    if lo == hi:
        return str(first)
    nets = list(ipaddress.summarize_address_range(first, last))
    if len(nets) == 1:
        return str(nets[0])
    return f"{first}-{last}"


def _int(text: str, bits: int) -> int:
    if not text.isdigit():
        raise ElementError(f"{text!r} is not a decimal number")
    value = int(text)
    if value >= 1 << bits:
        raise ElementError(f"{text!r} does not fit in {bits} bits")
    return value


def _int_bounds(text: str, bits: int, interval: bool) -> tuple[int, int]:
    if "-" in text:
        if not interval:
            raise ElementError(f"{text!r}: ranges need a set with flags interval")
        lo_text, hi_text = text.split("-", 1)
        lo, hi = _int(lo_text, bits), _int(hi_text, bits)
        if lo > hi:
            raise ElementError(f"{text!r}: range start is above its end")
        return lo, hi
    value = _int(text, bits)
    return value, value


def _canonical_verdict(text: str) -> str:
    words = text.split()
    if len(words) == 1 and words[0] in _PLAIN_VERDICTS:
        return words[0]
    if len(words) == 2 and words[0] in _CHAIN_VERDICTS:
        return f"{words[0]} {words[1]}"
    raise ElementError(f"{text!r} is not a verdict (accept, drop, continue, return, jump CHAIN, goto CHAIN)")


def _canonical_one(text: str, type_: str, interval: bool) -> str:
    text = text.strip()
    if type_ in _IP_VERSION:
        return _canonical_ip(text, _IP_VERSION[type_], interval)
    if type_ in _INT_BITS:
        lo, hi = _int_bounds(text, _INT_BITS[type_], interval)
        return str(lo) if lo == hi else f"{lo}-{hi}"
    if type_ == "ifname":
        if not _IFNAME.match(text):
            raise ElementError(f"{text!r} is not an interface name (1-15 characters, no spaces or quotes)")
        return text
    if type_ == "ether_addr":
        if not _MAC.match(text):
            raise ElementError(f"{text!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
        return text.lower()
    return _canonical_verdict(text)


def bounds(text: str, type_: str) -> tuple[int, int] | None:
    """The integer span of an interval-capable element (addresses and numbers), else None."""
    if type_ in _IP_VERSION:
        return _ip_bounds(text, _IP_VERSION[type_], True)
    if type_ in _INT_BITS:
        return _int_bounds(text, _INT_BITS[type_], True)
    return None


# ---- whole elements -----------------------------------------------------------------------------------------


def _parts(text: str, types: tuple[str, ...]) -> list[str]:
    parts = text.split(CONCAT_SEP) if len(types) > 1 else [text]
    if len(parts) != len(types):
        raise ElementError(f"{text!r} has {len(parts)} part(s), datatype {CONCAT_SEP.join(types)!r} has {len(types)}")
    return parts


def canonical(text: str, type_: str, *, interval: bool = False) -> str:
    """``text`` in the form nft prints it back; raises ElementError when nft would refuse or misread it."""
    if type_ == "ipv4_addr" and _v4_prefix_len(text, interval) is not None:
        return text
    types = split_type(type_, allow_verdict=True)
    try:
        if len(types) == 1:
            return _canonical_one(text, types[0], interval)
        return CONCAT_SEP.join(_canonical_one(p, t, interval) for p, t in zip(_parts(text, types), types, strict=True))
    except ElementError as exc:
        raise ElementError(f"element {text!r} of type {type_!r}: {exc}") from None


def _one_to_json(text: str, type_: str) -> Any:
    if type_ == "verdict":
        verb, *target = text.split()
        return {verb: {"target": target[0]}} if target else {verb: None}
    if type_ in _IP_VERSION:
        if "/" in text:
            addr, length = text.split("/")
            return {"prefix": {"addr": addr, "len": int(length)}}
        if "-" in text:
            return {"range": text.split("-", 1)}
        return text
    if type_ in _INT_BITS:
        if "-" in text:
            lo, hi = text.split("-", 1)
            return {"range": [int(lo), int(hi)]}
        return int(text)
    return text


def to_json(text: str, type_: str, *, interval: bool = False) -> Any:
    """The libnftables JSON of one element (validated, canonical)."""
    types = split_type(type_, allow_verdict=True)
    parts = _parts(canonical(text, type_, interval=interval), types)
    items = [_one_to_json(p, t) for p, t in zip(parts, types, strict=True)]
    return items[0] if len(items) == 1 else {"concat": items}


def many_to_json(texts: Iterable[str], type_: str, *, interval: bool = False) -> list[Any]:
    """``to_json`` of each element, with canonical IPv4 prefixes and addresses taken inline (100k-element sets)."""
    if type_ != "ipv4_addr":
        return [to_json(t, type_, interval=interval) for t in texts]
    out: list[Any] = []
    for text in texts:
        n = _v4_prefix_len(text, interval)
        if n is None:
            out.append(to_json(text, type_, interval=interval))
        elif n < 0:
            out.append(text)
        else:
            out.append({"prefix": {"addr": text[: text.index("/")], "len": n}})
    return out


def many_to_json_text(texts: Iterable[str], type_: str, *, interval: bool = False, checked: bool = False) -> str:
    """``json.dumps(many_to_json(...))`` without the 100k dicts: a set's elements as JSON text.

    At 100k elements the dicts were about 45 MB of the peak of ``magw apply`` (docs/performance.md), alive
    while libnftables parsed the text made from them. ``checked``: every element is already known
    to be canonical (the driver's preflight said so), so IPv4 elements are only split, not read again.
    """
    if type_ != "ipv4_addr":
        return json.dumps(many_to_json(texts, type_, interval=interval))
    if checked:
        # In address order, not our text order (11.0.10.0 before 11.0.2.0): libnftables 1.0.6 takes about 0.1 s
        # less on 100k prefixes given in order (1.28-1.33 s against 1.38-1.49 s, docs/performance.md);
        # sorting costs 40 ms.
        return "[" + ", ".join(map(_checked_v4_json, checked_v4_in_address_order(texts))) + "]"
    out: list[str] = []
    for text in texts:
        n = _v4_prefix_len(text, interval)
        if n is None:
            out.append(json.dumps(to_json(text, type_, interval=interval)))
        elif n < 0:
            out.append(f'"{text}"')  # the fast path matched digits and dots only: nothing to escape
        else:
            out.append(f'{{"prefix": {{"addr": "{text[: text.index("/")]}", "len": {n}}}}}')
    return "[" + ", ".join(out) + "]"


def checked_v4_in_address_order(texts: Iterable[str]) -> list[str]:
    """Canonical IPv4 elements (prefixes, ranges, addresses) sorted by their first address: how libnftables takes
    a large interval set fastest, in JSON and in nft syntax alike (docs/performance.md)."""
    return sorted(texts, key=_checked_v4_start)


def _checked_v4_start(text: str) -> bytes:
    """The first address of a canonical IPv4 element (prefix, range or address), packed: sorts in address order."""
    return socket.inet_aton(text.partition("/")[0].partition("-")[0])


def _checked_v4_json(text: str) -> str:
    """The JSON text of a canonical IPv4 element: a prefix, a range or an address."""
    if "/" in text:
        addr, length = text.split("/")
        return f'{{"prefix": {{"addr": "{addr}", "len": {length}}}}}'
    if "-" in text:
        lo, hi = text.split("-")
        return f'{{"range": ["{lo}", "{hi}"]}}'
    return f'"{text}"'


def from_json(value: Any) -> str:
    """Our string for an element (or map value) as ``nft -j list`` prints it."""
    if isinstance(value, bool) or value is None:
        raise ElementError(f"unexpected element {value!r}")
    if isinstance(value, str | int):
        return str(value)
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "prefix":
            return f"{inner['addr']}/{inner['len']}"
        if key == "range":
            return f"{from_json(inner[0])}-{from_json(inner[1])}"
        if key == "concat":
            return CONCAT_SEP.join(from_json(v) for v in inner)
        if key == "elem":  # an element with options (timeout, comment, counter): keep the value
            return from_json(inner["val"])
        if key in _PLAIN_VERDICTS and inner is None:
            return str(key)
        if key in _CHAIN_VERDICTS and isinstance(inner, dict):
            return f"{key} {inner['target']}"
    raise ElementError(f"unexpected element {value!r}")
