"""The planner's nft table through the real nft, in a throwaway namespace.

Loads ``table_text`` (the printer's output) with ``nft -f`` and reads the table
back with ``nft -j list`` (an independent checker): the printer's text must be
valid nft input that means exactly the builder's JSON, rule by rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from magw.desired.nft import expr as x
from magw.desired.nft.text import table_text
from magw.desired.nft.values import NftChain, NftRule, NftSet, NftTable
from magw.desired.node.planner import plan
from magw.model import Strategy
from tests.support.netns import nft_json, run
from tests.support.planner_seed import seed_east


def _load(ns: str, table: NftTable, tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "table.nft"
    script.write_text(table_text(table))
    loaded = run(ns, "nft", "-f", str(script), check=False)
    assert loaded.returncode == 0, f"nft -f refused the printed table:\n{loaded.stderr}\n{script.read_text()}"
    return nft_json(ns, "list", "table", table.family, table.name)  # type: ignore[no-any-return]  # parsed JSON


def _readback(listing: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(sets, chains, rules) of a listing, without handles."""
    objects = listing["nftables"]
    sets = [(s["name"], s["type"], s.get("flags", []), s.get("elem", [])) for o in objects if (s := o.get("set"))]
    chains = [
        (c["name"], c.get("type"), c.get("hook"), c.get("prio"), c.get("policy"))
        for o in objects
        if (c := o.get("chain"))
    ]
    rules = [
        (r["chain"], json.dumps(r["expr"], sort_keys=True), r.get("comment")) for o in objects if (r := o.get("rule"))
    ]
    return sorted(sets), sorted(chains), rules


def _expected(table: NftTable) -> tuple[list[Any], list[Any], list[Any]]:
    sets = [(s.name, s.type, list(s.flags), [x.element_json(e) for e in s.elements]) for s in table.sets]
    chains = [(c.name, c.type, c.hook, c.priority, c.policy) for c in table.chains]
    chain_order = [c.name for c in table.chains]
    rules = [(r.chain, r.expr, r.comment) for name in chain_order for r in table.rules if r.chain == name]
    return sorted(sets), sorted(chains), rules


def _chain_ordered(rules: list[Any], chain_order: list[str]) -> list[Any]:
    return [r for name in chain_order for r in rules if r[0] == name]


@pytest.mark.kernel
@pytest.mark.parametrize("node", ["e-w1", "e-gw1"])
def test_planned_table_reads_back_identically(ns: str, tmp_path: Path, node: str) -> None:
    """The planned ``ip magw`` table of a worker and a gateway reads back from the kernel unchanged."""
    table = plan(seed_east(Strategy.RESILIENT), node).nft
    assert table is not None
    sets, chains, rules = _readback(_load(ns, table, tmp_path))
    exp_sets, exp_chains, exp_rules = _expected(table)
    assert (sets, chains) == (exp_sets, exp_chains)
    assert _chain_ordered(rules, [c.name for c in table.chains]) == exp_rules


def _every_shape_table() -> NftTable:
    """A table using every builder shape the printer supports (valid hooks for each statement)."""
    post = [
        [x.match(x.ip_saddr(), x.prefix("10.0.0.0/8")), x.masquerade()],
        [x.match(x.payload("tcp", "dport"), 81), x.snat("10.2.2.2", 80)],
        [x.match(x.meta("mark"), 1), x.counter(), x.return_()],
        [x.match(x.payload("ip", "protocol"), "tcp"), x.jump("sub")],
        [x.match(x.ip_saddr(), x.set_ref("s"), "!="), x.goto("sub")],
        [x.match(x.bitand(x.meta("mark"), 786432), 786432), x.snat(x.addr_range("10.4.4.4", "10.4.4.8"))],
        [x.match(x.ip_daddr(), x.prefix("10.9.9.9/32")), x.snat(x.ip_saddr())],
    ]
    pre = [
        [x.match(x.payload("tcp", "dport"), 80), x.dnat("10.3.3.3", 8080)],
        [x.match(x.ip_daddr(), "10.1.1.1"), x.dnat("10.3.3.3")],
    ]
    fwd = [
        [x.flags_in(x.ct("state"), "established", "related"), x.accept()],
        [x.flags_in(x.ct("status"), "dnat", negate=True), x.drop()],
        [x.match(x.meta("iif"), "lo"), x.drop()],
        [x.match(x.ip_daddr(), x.anon_set(["10.0.0.1", "10.0.0.2"])), x.accept()],
        [x.match(x.meta("l4proto"), "udp"), x.counter(), x.accept()],
        [x.udp_dport(4500), x.accept()],
        [x.tcp_flags("syn", ("syn", "rst")), x.counter(), x.mss_clamp_to_pmtu()],
        [x.mangle(x.meta("mark"), 786432)],
    ]
    return NftTable(
        family="ip",
        name="magw",
        sets=[NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.1.0.0/16", "10.9.9.9"))],
        chains=[
            NftChain(name="sub"),
            NftChain(name="post", type="nat", hook="postrouting", priority=90, policy="accept"),
            NftChain(name="pre", type="nat", hook="prerouting", priority=-100, policy="accept"),
            NftChain(name="filter_fwd", type="filter", hook="forward", priority=0, policy="accept"),
        ],
        rules=tuple(
            NftRule(chain=chain, expr=x.canonical(exprs), comment=f"magw: {chain} {i}" if i % 2 else None)
            for chain, group in (("post", post), ("pre", pre), ("filter_fwd", fwd))
            for i, exprs in enumerate(group)
        ),
    )


@pytest.mark.kernel
def test_every_builder_shape_reads_back_identically(ns: str, tmp_path: Path) -> None:
    """Every statement and operand shape the builder makes is exactly what nft lists back."""
    table = _every_shape_table()
    sets, chains, rules = _readback(_load(ns, table, tmp_path))
    exp_sets, exp_chains, exp_rules = _expected(table)
    assert (sets, chains) == (exp_sets, exp_chains)
    assert _chain_ordered(rules, [c.name for c in table.chains]) == exp_rules
