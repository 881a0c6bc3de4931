"""The driver's fast JSON text of a whole table equals the plain ``json.dumps`` of its commands (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from magw.desired.nft import NftMap, NftSet, NftTable
from magw.desired.planner import plan
from magw.drivers.nft.codec import document, replace_commands, replace_document_text
from magw.snapshot import load_snapshot

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


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
        assert fast == json.loads(json.dumps(document(replace_commands(table))))
