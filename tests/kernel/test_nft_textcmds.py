"""magw.drivers.nft.textcmds: a table replace in nft syntax makes the same table as the JSON document.

The contract runs on the real kernel: every kind of table our planners make (node, Globalnet gateway and
worker, OVN gateway, egress gateway) is applied once as nft syntax and once as the JSON document, each in its
own throwaway namespace, and the ``nft`` command lists the two identically (handles aside). The rest are the
cases the syntax cannot say, which must fall back to JSON.
"""

from __future__ import annotations

import json

import attrs
import pytest
from structlog.testing import capture_logs

from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.desired.node.planner import plan
from magw.drivers.nft import NftDriver
from magw.drivers.nft.codec import document, replace_commands
from magw.drivers.nft.libnft import Nft
from magw.drivers.nft.textcmds import replace_text
from magw.reconcile.changeset import NftChange
from tests.support.egress_world import node_plan
from tests.support.netns import can_use_netns, netns, nft_json
from tests.support.nft_examples import CASES, planned, without_handles
from tests.support.ovn_node_world import snapshot as ovn_snapshot


def _tables() -> list[tuple[str, NftTable]]:
    tables = [(f"{example}:{node}", planned(example, node)) for example, node in CASES]
    for globalnet in (False, True):
        ovn = plan(ovn_snapshot(globalnet=globalnet), "e-gw1").nft
        assert ovn is not None
        tables.append((f"ovn-gateway globalnet={globalnet}", ovn))
    for node in ("n1", "n2", "n3"):
        state = node_plan(node).state
        tables += [(f"egress:{node}", t) for t in (state.nft, *state.extra_nft) if t is not None]
    return tables


TABLES = _tables()
RULE = NftRule(chain="post", expr=json.dumps([{"accept": None}]))
CHAIN = NftChain(name="post", type="nat", hook="postrouting", priority=100, policy="accept")
E_ACUTE = "\u00e9"


def test_every_planned_table_kind_is_covered_and_has_an_nft_syntax_form() -> None:
    names = {(t.family, t.name) for _, t in TABLES}
    assert names == {("ip", "magw"), ("ip", "magw-egress")}
    assert any(t.maps for _, t in TABLES) and any(len(t.sets) > 2 for _, t in TABLES)
    assert [label for label, t in TABLES if replace_text(t) is None] == []


def test_the_commands_come_in_the_json_document_order() -> None:
    table = NftTable(
        family="ip",
        name="t",
        chains=[CHAIN],
        sets=[NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.0.2.0/24", "10.0.10.0/24"))],
        maps=[NftMap(name="m", type="ipv4_addr", map="ipv4_addr", elements=(("10.0.0.1", "242.0.0.1"),))],
        rules=[NftRule(chain="post", expr=RULE.expr, comment="a comment")],
    )
    assert replace_text(table) == (
        "add table ip t\ndelete table ip t\nadd table ip t\n"
        "add chain ip t post { type nat hook postrouting priority 100; policy accept; }\n"
        "add set ip t s { type ipv4_addr; flags interval; elements = { 10.0.2.0/24, 10.0.10.0/24 }; }\n"
        "add map ip t m { type ipv4_addr : ipv4_addr; elements = { 10.0.0.1 : 242.0.0.1 }; }\n"
        'add rule ip t post accept comment "a comment"\n'
    )


def _oifname(name: str) -> dict[str, object]:
    return {"left": {"meta": {"key": "oifname"}}, "op": "==", "right": name}


@pytest.mark.parametrize(
    "table",
    [
        NftTable(family="ip", name="a b", chains=[CHAIN]),
        NftTable(family="ip", name="t", chains=[CHAIN], rules=[NftRule(chain="post", expr=RULE.expr, comment='a "q"')]),
        NftTable(family="ip", name="t", chains=[CHAIN], rules=[NftRule(chain="post", expr=RULE.expr, comment=E_ACUTE)]),
        NftTable(family="ip", name="t", chains=[CHAIN], rules=[NftRule(chain="post", expr='[{"unknown": {}}]')]),
        NftTable(family="ip", name="t", sets=[NftSet(name="p", type="inet_service", elements=("80",))]),
        NftTable(family="ip", name="t", maps=[NftMap(name="m", type="ipv4_addr", map="verdict", elements=())]),
        NftTable(
            family="ip",
            name="t",
            chains=[CHAIN],
            rules=[NftRule(chain="post", expr=json.dumps([{"match": _oifname('a"b')}, {"accept": None}]))],
        ),
        NftTable(
            family="ip",
            name="t",
            chains=[attrs.evolve(CHAIN, policy="accept; flush ruleset")],
        ),
        NftTable(
            family="ip",
            name="t",
            chains=[CHAIN],
            rules=[NftRule(chain="post", expr=json.dumps([{"jump": {"target": "post accept"}}]))],
        ),
        NftTable(
            family="ip",
            name="t",
            chains=[CHAIN],
            rules=[NftRule(chain="post", expr=json.dumps([{"match": _oifname("x } ; add")}, {"accept": None}]))],
        ),
        NftTable(
            family="ip",
            name="t",
            chains=[CHAIN],
            rules=[NftRule(chain="post", expr=json.dumps([{"snat": {"addr": {"ct": {"key": "ip daddr; x"}}}}]))],
        ),
        NftTable(family="ip", name="t", chains=[CHAIN], rules=[NftRule(chain="post", expr="[{")]),
    ],
    ids=[
        "name",
        "quote",
        "non-ascii",
        "unknown-expr",
        "set-type",
        "map-type",
        "ifname-escape",
        "policy-with-semicolon",
        "value-with-blank",
        "value-with-brace",
        "ct-key-not-an-address",
        "not-json",
    ],
)
def test_what_nft_syntax_cannot_say_is_left_to_json(table: NftTable) -> None:
    assert replace_text(table) is None


def _listing(ns: str, table: NftTable) -> dict[str, object]:
    return without_handles(nft_json(ns, "list", "table", table.family, table.name))


@pytest.mark.kernel
@pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces")
@pytest.mark.parametrize("label", [label for label, _ in TABLES])
def test_nft_syntax_and_json_make_the_same_table_in_the_kernel(label: str) -> None:
    table = dict(TABLES)[label]
    text = replace_text(table)
    assert text is not None
    with netns("magwt-tx") as a, netns("magwt-tx") as b, Nft(a) as by_text, Nft(b) as by_json:
        by_text.run(text)
        by_json.run(json.dumps(document(replace_commands(table))))
        assert _listing(a, table) == _listing(b, table)
        with NftDriver(a, tables=[(table.family, table.name)]) as driver:
            assert driver.observe() == table
            by_text.run(text)  # a replace of a table that exists: the same table again
            assert driver.observe() == table


@pytest.mark.kernel
@pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces")
def test_a_name_nft_syntax_refuses_goes_as_json_and_says_so() -> None:
    """``fwd`` is an nft keyword: the text does not parse, nothing reaches the kernel, the JSON document does."""
    table = NftTable(family="ip", name="magw", chains=[NftChain(name="fwd")], sets=[NftSet(name="s", type="ipv4_addr")])
    assert replace_text(table) is not None
    with netns("magwt-tx") as ns, NftDriver(ns) as driver, capture_logs() as logs:
        result = driver.apply([NftChange(family="ip", name="magw", table=table)])
        observed = driver.observe()
    assert result.failed == ()
    assert observed == table
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["nft.text_refused"]


class _CountingNft(Nft):
    """The real binding, counting the transactions it runs."""

    def __init__(self, netns: str) -> None:
        super().__init__(netns)
        self.runs = 0

    def run(self, command: str | bytes) -> str:
        self.runs += 1
        return super().run(command)


@pytest.mark.kernel
@pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces")
def test_a_table_the_kernel_refuses_is_sent_once_and_not_blamed_on_the_syntax() -> None:
    """A nat chain on the forward hook parses in either form and the kernel refuses it (EOPNOTSUPP): the text's
    failure is the result, the JSON document is not sent as well, and no ``nft.text_refused`` is logged."""
    nat = NftChain(name="fw", type="nat", hook="forward", priority=0, policy="accept")
    table = NftTable(family="ip", name="magw", chains=[nat])
    assert replace_text(table) is not None
    with netns("magwt-tx") as ns, _CountingNft(ns) as nft, capture_logs() as logs:
        driver = NftDriver(ns, nft=nft)
        result = driver.apply([NftChange(family="ip", name="magw", table=table)])
        runs = nft.runs
        observed = driver.observe()
    assert len(result.failed) == 1 and "Operation not supported" in result.failed[0].error, result.failed
    assert observed is None
    assert runs == 1
    assert "nft.text_refused" not in [e["event"] for e in logs]
