"""The driver's fast JSON text of a whole table equals the plain ``json.dumps`` of its commands (pure), but for the
order of a checked IPv4 set's elements: address order."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magw.desired.nft.values import NftMap, NftSet, NftTable
from magw.desired.node.planner import plan
from magw.drivers.nft.codec import document, replace_commands, replace_document_text
from magw.snapshot.load import load_snapshot
from tests.support.paths import EXAMPLES


def _tables() -> list[NftTable]:
    gn = load_snapshot(EXAMPLES / "globalnet-snapshot.yaml")
    seed = load_snapshot(EXAMPLES / "seed-east.yaml")
    tables = [plan(gn, "e-gw1").nft, plan(gn, "e-w1").nft, plan(seed, "e-gw1").nft]
    extra = NftTable(
        family="ip",
        name="t",
        sets=[NftSet(name="ports", type="inet_service", elements=("80", "443"))],
        maps=[
            NftMap(name="v", type="ipv4_addr", map="verdict", elements=[("10.0.0.1", "accept")]),
            NftMap(
                name="r", type="ipv4_addr", map="ipv4_addr", flags=("interval",), elements=[("10.0.0.0/8", "1.2.3.4")]
            ),
        ],
    )
    return [t for t in (*tables, extra) if t is not None]


@pytest.mark.parametrize("checked", [True, False])
def test_fast_text_is_the_same_document(checked: bool) -> None:
    for table in _tables():
        fast = json.loads(replace_document_text(table, checked=checked))
        expected = json.loads(json.dumps(document(replace_commands(table))))
        if checked:  # the one documented difference: a checked IPv4 set's elements come in address order
            for command in expected["nftables"]:
                s = command.get("add", {}).get("set")
                if s is not None and s["type"] == "ipv4_addr" and "elem" in s:
                    s["elem"].sort(key=_first_address)
        assert fast == expected


def _first_address(element: object) -> int:
    """The first address of a parsed JSON element: a prefix, a range or an address (ipaddress reads it)."""
    if isinstance(element, dict) and "prefix" in element:
        return int(ipaddress.IPv4Address(element["prefix"]["addr"]))
    if isinstance(element, dict) and "range" in element:
        return int(ipaddress.IPv4Address(element["range"][0]))
    assert isinstance(element, str)
    return int(ipaddress.IPv4Address(element))


def _not_one_prefix(text: str) -> bool:
    lo, hi = (ipaddress.IPv4Address(t) for t in text.split("-"))
    return len(list(ipaddress.summarize_address_range(lo, hi))) > 1


_canonical_v4 = st.one_of(
    st.integers(0, (1 << 32) - 1).map(lambda n: str(ipaddress.IPv4Address(n))),
    st.builds(
        lambda n, length: str(ipaddress.IPv4Network((n, length), strict=False)),
        st.integers(0, (1 << 32) - 1),
        st.integers(1, 31),
    ),
    st.builds(
        lambda a, b: f"{ipaddress.IPv4Address(min(a, b))}-{ipaddress.IPv4Address(max(a, b) + 1)}",
        st.integers(0, (1 << 32) - 2),
        st.integers(0, (1 << 32) - 2),
    ).filter(_not_one_prefix),  # a range that is exactly one prefix is written as that prefix: not canonical
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_canonical_v4, max_size=40, unique=True))
def test_checked_set_elements_are_the_same_elements_in_address_order(texts: list[str]) -> None:
    """libnftables takes less time on an interval set given in address order (docs/performance.md): the checked text
    of a set lists its elements so, and they are exactly the plain document's elements."""
    table = NftTable(
        family="ip", name="t", sets=[NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=texts)]
    )
    (fast,) = [
        c for c in json.loads(replace_document_text(table, checked=True))["nftables"] if "set" in c.get("add", {})
    ]
    (plain,) = [c for c in document(replace_commands(table))["nftables"] if "set" in c.get("add", {})]
    fast_elements = fast["add"]["set"].pop("elem", [])
    plain_elements = json.loads(json.dumps(plain["add"]["set"].pop("elem", [])))
    assert fast == json.loads(json.dumps(plain))
    assert sorted(map(json.dumps, fast_elements)) == sorted(map(json.dumps, plain_elements))
    starts = [_first_address(e) for e in fast_elements]
    assert starts == sorted(starts)
