"""The in-place table change against the kernel (``magw.reconcile.nftupdate``, ``magw.drivers.nft.updatecmds``).

- It reads back as the desired table, in one transaction that deletes no table: the table's handle and the handles
  of the chains and sets that stay the same do not change (checked with the nft command, not our binding).
- A stale update (the kernel's table changed since it was observed) is refused by the kernel as a whole, and the
  driver then replaces the whole table: the result is the desired table all the same.
- Under traffic, packets that need a stateless rewrite never miss it while its chain changes again and again (a
  whole-table replace lost some: benchmarks/nft_update_window.py prints both side by side).

Each test uses throwaway namespaces, removed afterwards.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from magw.desired.nft.values import NftChain, NftRule, NftSet, NftTable
from magw.drivers.nft import NftDriver
from magw.reconcile.changeset import NftChange
from magw.reconcile.diff import nft_changes
from tests.support.netns import nft_json
from tests.support.nft_backends import ACCEPT, KernelBackend, expected_listing, expr, in_set, open_backend, saddr
from tests.support.rewrite_path import changing_tables, rewrite_path, run_traffic

pytestmark = pytest.mark.kernel

POST = NftChain(name="postrouting", type="nat", hook="postrouting", priority=90, policy="accept")
FWD = NftChain(name="forward", type="filter", hook="forward", priority=0, policy="accept")
INPUT = NftChain(name="input", type="filter", hook="input", priority=0, policy="accept")
REMOTE = NftSet(name="remote_cidrs", type="ipv4_addr", flags=("interval",), elements=("10.2.0.0/16",))
PEERS = NftSet(name="vxlan_peers", type="ipv4_addr", elements=("172.18.0.11",))
SNAT = NftRule(chain="postrouting", expr=expr(in_set(saddr(), "remote_cidrs"), {"masquerade": None}), comment="nat")
FWD_OK = NftRule(chain="forward", expr=expr(in_set(saddr(), "remote_cidrs"), ACCEPT), comment="fwd")
GUARD = NftRule(chain="input", expr=expr(in_set(saddr(), "vxlan_peers"), ACCEPT), comment="guard")
OLD = NftTable(family="ip", name="magw", sets=(REMOTE,), chains=(POST, FWD), rules=(SNAT, FWD_OK))

# (desired, what must keep its kernel object: chains, sets)
CASES = {
    "a rule more": (attrs.evolve(OLD, rules=(SNAT, FWD_OK, attrs.evolve(FWD_OK, comment="fwd2"))),
                    {"postrouting"}, {"remote_cidrs"}),
    "a chain and a set more, elements changed": (
        attrs.evolve(OLD, sets=(attrs.evolve(REMOTE, elements=("10.2.0.0/16", "10.3.0.0/16")), PEERS),
                     chains=(POST, FWD, INPUT), rules=(SNAT, FWD_OK, GUARD)),
        {"postrouting", "forward"}, {"remote_cidrs"}),
    "a chain less": (attrs.evolve(OLD, chains=(POST,), rules=(SNAT,)), {"postrouting"}, {"remote_cidrs"}),
    "a redefined chain": (attrs.evolve(OLD, chains=(attrs.evolve(POST, priority=100), FWD)), {"forward"},
                          {"remote_cidrs"}),
    "a reshaped set": (attrs.evolve(OLD, sets=(NftSet(name="remote_cidrs", type="ipv4_addr", elements=("10.2.0.1",)),)),
                       set(), set()),
}  # fmt: skip


def _by_chain(listing: dict[str, Any] | None) -> dict[str, Any]:
    """A listing with its rules grouped by chain, in their order within the chain: a chain added in place lists
    after the kept ones, and the order across chains means nothing to the kernel."""
    assert listing is not None
    return {**listing, "rules": sorted(listing["rules"], key=lambda r: r[0])}


def _handles(kernel: KernelBackend) -> dict[str, Any]:
    items = nft_json(kernel.ns, "list", "table", "ip", "magw")["nftables"]
    return {
        "table": next(i["table"]["handle"] for i in items if "table" in i),
        "chains": {i["chain"]["name"]: i["chain"]["handle"] for i in items if "chain" in i},
        "sets": {i[k]["name"]: i[k]["handle"] for i in items for k in ("set", "map") if k in i},
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_update_in_place_reads_back_and_keeps_what_stays(case: str) -> None:
    desired, kept_chains, kept_sets = CASES[case]
    with open_backend("kernel") as kernel:
        assert isinstance(kernel, KernelBackend)
        result = kernel.driver.apply([NftChange(family="ip", name="magw", table=OLD)])
        assert result.failed == ()
        before = _handles(kernel)
        (change,) = nft_changes(desired, kernel.driver.observe())
        assert change.update is not None and change.elements is None
        kernel.nft.sent.clear()
        result = kernel.driver.apply([change])
        assert result.failed == ()
        assert _by_chain(kernel.listing("ip", "magw")) == _by_chain(expected_listing(desired))
        assert kernel.driver.observe() == desired
        after = _handles(kernel)
        assert after["table"] == before["table"], "the table was deleted and added again"
        assert {c: after["chains"][c] for c in kept_chains} == {c: before["chains"][c] for c in kept_chains}
        assert {s: after["sets"][s] for s in kept_sets} == {s: before["sets"][s] for s in kept_sets}
        (sent,) = kernel.nft.sent  # one transaction
        assert not [c for c in json.loads(sent)["nftables"] if "table" in c.get("delete", {})]


def test_a_stale_update_is_refused_whole_and_the_table_replaced() -> None:
    """The update was computed from a table the kernel no longer holds (a chain of it deleted behind our back): the
    kernel refuses the batch, nothing of it is applied, and the driver replaces the whole table."""
    desired, _chains, _sets = CASES["a rule more"]
    with open_backend("kernel") as kernel:
        assert isinstance(kernel, KernelBackend)
        assert kernel.driver.apply([NftChange(family="ip", name="magw", table=OLD)]).failed == ()
        (change,) = nft_changes(desired, kernel.driver.observe())
        done = kernel.nft_cli("delete", "chain", "ip", "magw", "forward")
        assert done.returncode == 0, done.stderr
        kernel.nft.sent.clear()
        assert kernel.driver.apply([change]).failed == ()
        assert kernel.driver.observe() == desired
        assert kernel.listing("ip", "magw") == expected_listing(desired)
        assert len(kernel.nft.sent) == 2  # the refused update, then the whole replace


def test_no_packet_misses_a_stateless_rewrite_while_its_chain_changes() -> None:
    """8 UDP flows at 1,000 datagrams/s each through a router whose rewrite chain is flushed and refilled, in place,
    as often as the driver can for about 2.4 s: every datagram arrives."""
    with rewrite_path() as path:
        driver = NftDriver(path.router)
        try:
            assert driver.apply([NftChange(family="ip", name="magw", table=changing_tables(0))]).failed == ()

            def change(k: int) -> None:
                (c,) = nft_changes(changing_tables(k), changing_tables(k - 1))
                assert c.update is not None
                assert driver.apply([c]).failed == ()

            outcome = run_traffic(path, change)
        finally:
            driver.close()
        print(f"in-place changes: {outcome.changes}, sent {outcome.sent}, received {outcome.received}")
        assert outcome.changes >= 20, "too few changes to tell anything"
        assert outcome.sent > 0 and outcome.lost == 0
