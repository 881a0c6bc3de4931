"""Set/map elements: validation, the kernel's canonical form, and conversion to and from nft's JSON.

``canonical`` claims to predict what nft prints back; the kernel test checks
that claim element by element against a real read-back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from magw.drivers.nft import elements
from magw.drivers.nft.elements import ElementError
from tests.support.netns import nft_json, run

# (type, interval, written, what nft 1.0.6 prints back)
CANONICAL = [
    ("ipv4_addr", False, "10.1.1.1", "10.1.1.1"),
    ("ipv4_addr", True, "10.1.0.0/16", "10.1.0.0/16"),
    ("ipv4_addr", True, "10.1.0.1/16", "10.1.0.0/16"),
    ("ipv4_addr", True, "10.2.0.1/32", "10.2.0.1"),
    ("ipv4_addr", True, "10.3.0.0-10.3.0.255", "10.3.0.0/24"),
    ("ipv4_addr", True, "10.4.0.1-10.4.0.9", "10.4.0.1-10.4.0.9"),
    ("ipv4_addr", True, "10.5.0.1-10.5.0.1", "10.5.0.1"),
    ("ipv6_addr", True, "fd00:0::1/64", "fd00::/64"),
    ("ipv6_addr", False, "FD00::0:1", "fd00::1"),
    ("inet_service", False, "4500", "4500"),
    ("inet_service", True, "1000-2000", "1000-2000"),
    ("inet_service", True, "80-80", "80"),
    ("mark", False, "786432", "786432"),
    ("ifname", False, "vxlan-tunnel", "vxlan-tunnel"),
    ("ether_addr", False, "02:53:F0:12:00:06", "02:53:f0:12:00:06"),
    ("ipv4_addr . inet_service", False, "10.0.0.1 . 80", "10.0.0.1 . 80"),
    ("verdict", False, "jump  sub", "jump sub"),
    ("verdict", False, "accept", "accept"),
]


@pytest.mark.parametrize(("type_", "interval", "written", "printed"), CANONICAL)
def test_canonical_form(type_: str, interval: bool, written: str, printed: str) -> None:
    """canonical() gives the form nft prints back."""
    assert elements.canonical(written, type_, interval=interval) == printed


@pytest.mark.parametrize(
    ("type_", "interval", "text", "reason"),
    [
        ("ipv4_addr", False, "example.com", "not an IPv4 address"),
        ("ipv4_addr", False, "fd00::1", "not an IPv4 address"),
        ("ipv4_addr", False, "10.0.0.0/8", "need a set with flags interval"),
        ("ipv4_addr", True, "10.0.0.9-10.0.0.1", "range start is above its end"),
        ("ipv4_addr", True, "10.0.0.0/33", "not an IPv4 prefix"),
        ("inet_service", False, "https", "not a decimal number"),
        ("inet_service", False, "65536", "does not fit in 16 bits"),
        ("mark", False, "0xc0000", "not a decimal number"),
        ("ifname", False, "a-name-longer-than-15", "not an interface name"),
        ("ether_addr", False, "02:53:f0:12:00", "not a MAC address"),
        ("ipv4_addr . inet_service", False, "10.0.0.1", "has 1 part(s)"),
        ("verdict", False, "jump", "not a verdict"),
        ("inet_proto", False, "tcp", "datatype 'inet_proto' is not supported"),
    ],
)
def test_invalid_elements_name_the_element_and_the_reason(type_: str, interval: bool, text: str, reason: str) -> None:
    """Refused elements raise ElementError naming the element and why, in one line."""
    with pytest.raises(ElementError) as err:
        elements.canonical(text, type_, interval=interval)
    message = str(err.value)
    assert (reason in message, "\n" in message) == (True, False)


@pytest.mark.parametrize(
    ("type_", "text", "shape"),
    [
        ("ipv4_addr", "10.1.1.1", "10.1.1.1"),
        ("ipv4_addr", "10.1.0.0/16", {"prefix": {"addr": "10.1.0.0", "len": 16}}),
        ("ipv4_addr", "10.4.0.1-10.4.0.9", {"range": ["10.4.0.1", "10.4.0.9"]}),
        ("inet_service", "4500", 4500),
        ("inet_service", "1000-2000", {"range": [1000, 2000]}),
        ("ipv4_addr . inet_service", "10.0.0.1 . 80", {"concat": ["10.0.0.1", 80]}),
        ("verdict", "accept", {"accept": None}),
        ("verdict", "goto sub", {"goto": {"target": "sub"}}),
    ],
)
def test_to_json_and_back(type_: str, text: str, shape: Any) -> None:
    """to_json gives nft's JSON shape and from_json turns that shape back into the same string."""
    assert elements.to_json(text, type_, interval=True) == shape
    assert elements.from_json(shape) == text


def test_from_json_unwraps_elements_with_options() -> None:
    """An element printed with options (``{"elem": {"val": ...}}``) reads as its value."""
    assert (
        elements.from_json({"elem": {"val": {"prefix": {"addr": "10.0.0.0", "len": 8}}, "timeout": 5}}) == "10.0.0.0/8"
    )


def test_from_json_refuses_unknown_shapes() -> None:
    """An element shape we do not know raises instead of producing a wrong string."""
    with pytest.raises(ElementError, match="unexpected element"):
        elements.from_json({"set": [1, 2]})


def test_concatenated_type_json() -> None:
    """A concatenated datatype is a list in nft's JSON and `` . ``-joined in ours."""
    assert elements.type_to_json("ipv4_addr . inet_service") == ["ipv4_addr", "inet_service"]
    assert elements.type_from_json(["ipv4_addr", "inet_service"]) == "ipv4_addr . inet_service"
    assert elements.type_to_json("ipv4_addr") == "ipv4_addr"


def _nft_set(type_: str, interval: bool, element: str) -> dict[str, Any]:
    body: dict[str, Any] = {"family": "ip", "table": "t", "name": "s", "type": elements.type_to_json(type_)}
    if interval:
        body["flags"] = ["interval"]
    if type_ == "verdict":
        return {"map": {**body, "type": "ipv4_addr", "map": "verdict", "elem": [["10.0.0.1", element]]}}
    return {"set": {**body, "elem": [element]}}


@pytest.mark.kernel
@pytest.mark.parametrize(("type_", "interval", "written", "printed"), CANONICAL)
def test_canonical_form_matches_the_kernel(ns: str, type_: str, interval: bool, written: str, printed: str) -> None:
    """The element as WRITTEN (nft's JSON shape, not canonicalized) reads back from nft as canonical() says."""
    types = elements.split_type(type_, allow_verdict=True)
    parts = written.split(" . ") if len(types) > 1 else [written]
    shapes = [
        elements._one_to_json(" ".join(p.split()) if t == "verdict" else p, t)
        for p, t in zip(parts, types, strict=True)
    ]
    element = shapes[0] if len(shapes) == 1 else {"concat": shapes}
    commands = [
        {"add": {"table": {"family": "ip", "name": "t"}}},
        {"add": {"chain": {"family": "ip", "table": "t", "name": "sub"}}},
        {"add": _nft_set(type_, interval, element)},
    ]
    run(ns, "nft", "-j", json.dumps({"nftables": commands}))
    listed = next(i for i in nft_json(ns, "list", "table", "ip", "t")["nftables"] if "set" in i or "map" in i)
    (got,) = next(iter(listed.values()))["elem"]
    value = got[1] if type_ == "verdict" else got
    assert elements.from_json(value) == printed
