"""The driver's JSON codec: the shape of the one-transaction document, and observe's normalization."""

from __future__ import annotations

import json
from typing import Any

import attrs
from structlog.testing import capture_logs

from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.nft import preflight, transaction
from magw.drivers.nft.codec import canonical_expr, parse_table
from magw.drivers.nft.driver import transaction_text
from magw.reconcile.changeset import NftChange

TABLE = NftTable(
    family="ip",
    name="magw",
    sets=(NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.1.0.0/16", "10.9.9.9")),),
    maps=(NftMap(name="m", type="ipv4_addr", map="verdict", elements=(("10.2.0.1", "jump sub"),)),),
    chains=(NftChain(name="sub"), NftChain(name="fwd", type="filter", hook="forward", priority=0, policy="drop")),
    rules=(
        NftRule(chain="sub", expr='[{"accept": null}]'),
        NftRule(chain="fwd", expr='[{"jump": {"target": "sub"}}]', comment="c"),
    ),
)


def _verbs(doc: dict[str, Any]) -> list[str]:
    return [f"{verb} {next(iter(body))}" for cmd in doc["nftables"] for verb, body in cmd.items()]


def test_replace_is_one_document_in_a_kernel_valid_order() -> None:
    """add/delete/add table, then chains (maps may jump to them), sets, maps, rules in table order."""
    doc = transaction(NftChange(family="ip", name="magw", table=TABLE))
    assert _verbs(doc) == [
        "add table",
        "delete table",
        "add table",
        "add chain",
        "add chain",
        "add set",
        "add map",
        "add rule",
        "add rule",
    ]
    cmds = doc["nftables"]
    assert cmds[3]["add"]["chain"] == {
        "family": "ip",
        "table": "magw",
        "name": "fwd",
        "type": "filter",
        "hook": "forward",
        "prio": 0,
        "policy": "drop",
    }
    assert cmds[4]["add"]["chain"] == {"family": "ip", "table": "magw", "name": "sub"}
    assert cmds[5]["add"]["set"]["elem"] == [{"prefix": {"addr": "10.1.0.0", "len": 16}}, "10.9.9.9"]
    assert cmds[6]["add"]["map"]["elem"] == [["10.2.0.1", {"jump": {"target": "sub"}}]]
    assert [c["add"]["rule"].get("comment") for c in cmds[7:]] == ["c", None]


def test_delete_is_add_then_delete() -> None:
    """Deleting is ``add table; delete table``: it succeeds whether or not the table exists."""
    doc = transaction(NftChange(family="ip", name="magw", table=None))
    assert doc == {
        "nftables": [
            {"add": {"table": {"family": "ip", "name": "magw"}}},
            {"delete": {"table": {"family": "ip", "name": "magw"}}},
        ]
    }


def test_parse_strips_handles_counters_and_other_tables() -> None:
    """Handles go, counter values become zero, element wrappers unwrap, other tables' objects are ignored."""
    listing = {
        "nftables": [
            {"metainfo": {"version": "1.0.6"}},
            {"table": {"family": "ip", "name": "magw", "handle": 3}},
            {
                "set": {
                    "family": "ip",
                    "table": "magw",
                    "name": "s",
                    "handle": 4,
                    "type": ["ipv4_addr", "inet_service"],
                    "flags": ["timeout", "interval"],
                    "elem": [{"elem": {"val": {"concat": ["10.0.0.1", 80]}, "timeout": 30}}],
                }
            },
            {"chain": {"family": "ip", "table": "magw", "name": "c", "handle": 1}},
            {"chain": {"family": "ip", "table": "other", "name": "x", "handle": 1}},
            {
                "rule": {
                    "family": "ip",
                    "table": "magw",
                    "chain": "c",
                    "handle": 9,
                    "comment": "hi",
                    "expr": [{"counter": {"packets": 12, "bytes": 3400}}, {"accept": None}],
                }
            },
        ]
    }
    assert parse_table(listing, "ip", "magw") == NftTable(
        family="ip",
        name="magw",
        sets=(
            NftSet(
                name="s", type="ipv4_addr . inet_service", flags=("interval", "timeout"), elements=("10.0.0.1 . 80",)
            ),
        ),
        chains=(NftChain(name="c"),),
        rules=(NftRule(chain="c", expr='[{"counter": {"bytes": 0, "packets": 0}}, {"accept": null}]', comment="hi"),),
    )


def test_unmodelled_objects_are_logged() -> None:
    """An object kind we do not model (a flowtable) is reported, not silently dropped."""
    listing = {"nftables": [{"flowtable": {"family": "ip", "table": "magw", "name": "ft", "handle": 2}}]}
    with capture_logs() as logs:
        parse_table(listing, "ip", "magw")
    assert [(e["event"], e["kind"], e["name"]) for e in logs] == [("nft.observe_unmodelled", "flowtable", "ft")]


def test_canonical_expr_sorts_keys() -> None:
    """The canonical string is json.dumps(sort_keys=True), whatever key order nft printed."""
    expr = [{"match": {"right": "@s", "op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}}}]
    assert canonical_expr(expr) == json.dumps(expr, sort_keys=True)
    assert canonical_expr(expr).startswith('[{"match": {"left"')


def test_the_text_the_driver_sends_is_the_document() -> None:
    """transaction_text (elements written as text, no dict each) parses to exactly transaction's document,
    for a table with prefixes, addresses, a /32 and a non-canonical-looking range, and for a delete."""
    many = NftSet(
        name="many",
        type="ipv4_addr",
        flags=("interval",),
        elements=("10.1.0.0/16", "10.9.9.9", "10.8.0.0/32", "10.7.0.0-10.7.1.255", "10.6.0.1-10.6.0.9"),
    )
    table = attrs.evolve(TABLE, sets=(*TABLE.sets, many))
    for change in (
        NftChange(family="ip", name="magw", table=TABLE),
        NftChange(family="ip", name="magw", table=table),
        NftChange(family="ip", name="magw", table=None),
    ):
        assert json.loads(transaction_text(change)) == transaction(change)


def test_the_text_of_a_checked_table_splits_its_canonical_elements() -> None:
    """After preflight (checked=True) canonical prefixes, addresses and ranges are only split, to the same
    document as transaction's."""
    elems = ("10.1.0.0/16", "10.8.0.0", "0.0.0.0/0", "10.6.0.1-10.6.0.9", "10.5.0.0/31")
    many = NftSet(name="many", type="ipv4_addr", flags=("interval",), elements=elems)
    table = attrs.evolve(TABLE, sets=(*TABLE.sets, many))
    assert preflight.table_errors(table) == []
    change = NftChange(family="ip", name="magw", table=table)
    assert json.loads(transaction_text(change, checked=True)) == transaction(change)
