"""The IPv4 fast path of nft element canonicalisation (docs/performance.md) against an ``ipaddress`` oracle. No timing.

``magw.drivers.nft.elements`` reads IPv4 addresses and prefixes on ints; this oracle is the
``ipaddress`` reading it replaced: parse (host bits masked), then print an address, the one
prefix that covers the span, or a range.
"""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magw.desired.nft.values import NftSet
from magw.drivers.nft import preflight
from magw.drivers.nft.elements import ElementError, all_canonical_v4, canonical, many_to_json


def _oracle(text: str, interval: bool) -> str | None:
    """What nft prints back for ``text`` in an ipv4_addr set, or None when it is refused."""
    try:
        if "/" in text or "-" in text:
            if not interval:
                return None
            if "/" in text:
                net = ipaddress.IPv4Network(text, strict=False)
                lo, hi = int(net.network_address), int(net.broadcast_address)
            else:
                lo_text, hi_text = text.split("-", 1)
                lo, hi = int(ipaddress.IPv4Address(lo_text)), int(ipaddress.IPv4Address(hi_text))
                if lo > hi:
                    return None
        else:
            lo = hi = int(ipaddress.IPv4Address(text))
    except ValueError:
        return None
    first, last = ipaddress.IPv4Address(lo), ipaddress.IPv4Address(hi)
    if lo == hi:
        return str(first)
    nets = list(ipaddress.summarize_address_range(first, last))
    return str(nets[0]) if len(nets) == 1 else f"{first}-{last}"


_octet = st.one_of(st.integers(0, 255).map(str), st.integers(0, 300).map(lambda n: f"0{n}"), st.just("256"))
_address = st.builds(lambda a, b, c, d: f"{a}.{b}.{c}.{d}", _octet, _octet, _octet, _octet)
_texts = st.one_of(
    _address,
    st.builds(lambda a, n: f"{a}/{n}", _address, st.integers(0, 33).map(str) | st.just("08")),
    st.builds(lambda a, b: f"{a}-{b}", _address, _address),
    st.builds(lambda n: str(ipaddress.IPv4Network((n << 8, 24))), st.integers(0, (1 << 24) - 1)),
)


@settings(max_examples=1500, deadline=None)
@given(_texts, st.booleans())
def test_ipv4_elements_read_as_ipaddress_reads_them(text: str, interval: bool) -> None:
    """Addresses, prefixes (host bits, leading zeros, /32, /0) and ranges: same text back, or refused alike."""
    want = _oracle(text, interval)
    if want is None:
        with pytest.raises(ElementError):
            canonical(text, "ipv4_addr", interval=interval)
    else:
        assert canonical(text, "ipv4_addr", interval=interval) == want


def _json_oracle(canon: str) -> object:
    """libnftables' JSON for a canonical IPv4 element: the address, a prefix object, or a range pair."""
    if "/" in canon:
        addr, length = canon.split("/")
        return {"prefix": {"addr": addr, "len": int(length)}}
    return {"range": canon.split("-", 1)} if "-" in canon else canon


@settings(max_examples=800, deadline=None)
@given(st.lists(_texts, max_size=8), st.booleans())
def test_many_to_json_reads_each_element_as_ipaddress_does(texts: list[str], interval: bool) -> None:
    """The bulk JSON of a set's elements (the inline fast path) is each element's JSON, refusals included."""
    wants = [_oracle(t, interval) for t in texts]
    if any(w is None for w in wants):
        with pytest.raises(ElementError):
            many_to_json(texts, "ipv4_addr", interval=interval)
    else:
        assert many_to_json(texts, "ipv4_addr", interval=interval) == [_json_oracle(str(w)) for w in wants]


_joined_pieces = st.builds(lambda a, b: f"{a}\n{b}", _address, _address)  # an element holding a newline
_plain_address = st.integers(0, (1 << 32) - 1).map(lambda ip: str(ipaddress.IPv4Address(ip)))
_any_prefix = st.builds(lambda a, n: f"{a}/{n}", _plain_address, st.integers(0, 32))  # host bits, often
_aligned = st.builds(lambda n, plen: str(ipaddress.IPv4Network((n >> (32 - plen) << (32 - plen), plen))),
                     st.integers(0, (1 << 32) - 1), st.integers(0, 32))  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(_texts, _joined_pieces, _plain_address, _any_prefix, _aligned), max_size=8), st.booleans())
def test_all_canonical_v4_says_true_only_when_every_element_prints_back_as_given(
    texts: list[str], interval: bool
) -> None:
    """The preflight's one-pass check (``all_canonical_v4``) is True only when the ipaddress oracle prints every
    element back unchanged: elements with a newline, host bits, /32, big octets are never let through. It is
    exact for addresses and prefixes; a range (``0.0.0.0-0.0.0.2``, canonical) always sends the set to the
    element-by-element check, which is what its False means ("look closer")."""
    want = all(_oracle(t, interval) == t for t in texts)
    got = all_canonical_v4(tuple(texts), interval)
    assert want or not got
    if not any("-" in t for t in texts):
        assert got is want


def test_preflight_words_the_error_of_an_element_the_fast_check_refused() -> None:
    errors = preflight.set_errors(
        NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.0.0.0/8", "10.1.0.1/16"))
    )
    assert errors == ["set s: element '10.1.0.1/16' must be written '10.1.0.0/16' (the kernel prints it that way)"]
