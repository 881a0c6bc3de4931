"""The planner's nft tables survive a trip through the kernel unchanged (kernel tests).

For every node of the example snapshots, the planned ``ip magw`` table is applied
with NftDriver in a throwaway namespace; the read-back must equal the plan
exactly (so a second diff is empty), the fake must agree, and the nft command
itself must list the same rules. The printer's nft text, loaded with ``nft -f``,
must give the same table too.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from structlog.testing import capture_logs

from magw.desired.nft.text import table_text
from magw.desired.state import DesiredState
from magw.drivers.nft import NftDriver
from magw.drivers.nft.fake.ruleset import FakeNft
from magw.reconcile.changeset import NftChange
from magw.reconcile.diff import diff
from tests.support.netns import netns, nft_json
from tests.support.nft_examples import CASES, planned, without_handles
from tests.support.paths import DATA

pytestmark = pytest.mark.kernel

def _cli_rules(ns: str) -> list[tuple[str, str | None]]:
    """(chain, comment) of every rule of ``ip magw`` in listing order, read by the nft command."""
    items = nft_json(ns, "list", "table", "ip", "magw")["nftables"]
    return [(i["rule"]["chain"], i["rule"].get("comment")) for i in items if "rule" in i]


def _nft_file(ns: str, text: str) -> None:
    cmd = ["ip", "netns", "exec", ns, "nft", "-f", "-"]
    done = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=30, check=False)
    assert done.stderr == ""


@pytest.mark.parametrize(("example", "node"), CASES)
def test_planned_table_reads_back_exactly(example: str, node: str) -> None:
    """apply(plan) then observe() == plan, the second diff has no nft change, the fake agrees."""
    table = planned(example, node)
    change = NftChange(family="ip", name="magw", table=table)
    with netns("magwt-rt") as ns, NftDriver(ns) as driver:
        assert driver.apply([change]).failed == ()
        observed = driver.observe()
        cli_rules = _cli_rules(ns)
    fake = FakeNft()
    assert fake.apply([change]).failed == ()
    assert (observed, fake.observe()) == (table, table)
    assert diff(DesiredState(nft=table), DesiredState(nft=observed)).nft == ()
    assert cli_rules == [(r.chain, r.comment) for r in table.rules]


@pytest.mark.parametrize(("example", "node"), CASES[:2])
def test_printed_nft_text_loads_to_the_same_table(example: str, node: str) -> None:
    """The planner's nft text (``table_text``) loaded with ``nft -f`` reads back as the planned table."""
    table = planned(example, node)
    with netns("magwt-rt") as ns, NftDriver(ns) as driver:
        _nft_file(ns, table_text(table))
        assert driver.observe() == table


def test_a_table_made_by_nft_survives_observe_and_apply() -> None:
    """A table written in nft text by hand, observed and re-applied elsewhere, lists identically (no handles)."""
    text = (DATA / "nft_canonical_example.nft").read_text()
    with netns("magwt-rt") as src, netns("magwt-rt") as dst, NftDriver(src) as a, NftDriver(dst) as b:
        _nft_file(src, text)
        observed = a.observe()
        assert observed is not None
        assert b.apply([NftChange(family="ip", name="magw", table=observed)]).failed == ()
        assert b.observe() == observed
        first = without_handles(nft_json(src, "list", "table", "ip", "magw"))
        second = without_handles(nft_json(dst, "list", "table", "ip", "magw"))
    assert first == second


def test_canonical_example_json_is_what_observe_normalizes() -> None:
    """The stored ``nft -j`` example (nft 1.0.6) and a live listing of its .nft source normalize alike."""
    from magw.drivers.nft.codec import parse_table

    stored = json.loads((DATA / "nft_canonical_example.json").read_text())
    with netns("magwt-rt") as ns, NftDriver(ns) as driver:
        _nft_file(ns, (DATA / "nft_canonical_example.nft").read_text())
        live = driver.observe()
    assert live == parse_table(stored, "ip", "magw")


def test_apply_logs_one_event_per_transaction() -> None:
    """Each applied change logs nft.apply_done with the table, the rule count and whether it deleted."""
    table = planned("seed-east.yaml", "e-w1")
    changes = [NftChange(family="ip", name="magw", table=table), NftChange(family="ip", name="magw", table=None)]
    with netns("magwt-rt") as ns, NftDriver(ns) as driver, capture_logs() as logs:
        assert driver.apply(changes).failed == ()
    assert [(e["event"], e["table"], e["rules"], e["delete"]) for e in logs] == [
        ("nft.apply_done", "magw", len(table.rules), False),
        ("nft.apply_done", "magw", 0, True),
    ]
