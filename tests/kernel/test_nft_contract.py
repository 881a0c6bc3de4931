"""One contract for FakeNft and the real NftDriver: the same cases, the same outcomes.

Every test runs twice: against ``FakeNft`` and against ``NftDriver`` in a
throwaway namespace (marked ``kernel``; the backends are in tests/support/nft_backends.py).
For the kernel, an independent checker (``nft -j list`` through the nft command,
not our binding) confirms what the driver's own ``observe()`` says. Element-level
changes have their cases in tests/kernel/test_nft_elements_contract.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.reconcile.changeset import NftChange
from tests.support.nft_backends import (
    ACCEPT,
    BACKENDS,
    FWD,
    POST,
    SUB,
    Backend,
    apply_fails,
    apply_ok,
    daddr,
    delete,
    expected_listing,
    expr,
    in_set,
    open_backend,
    replace,
    saddr,
)

# ---- tables used by the cases ------------------------------------------------------------------------------

LOCAL = NftSet(name="local_cidrs", type="ipv4_addr", flags=("interval",), elements=("10.1.0.0/16", "100.1.0.0/16"))
REMOTE = NftSet(name="remote_cidrs", type="ipv4_addr", flags=("interval",), elements=("10.2.0.0/16",))
NULL_SNAT = NftRule(
    chain="postrouting",
    expr=expr(in_set(saddr(), "local_cidrs"), in_set(daddr(), "remote_cidrs"), {"snat": {"addr": saddr()}}),
    comment="keep-src",
)
FWD_ACCEPT = NftRule(chain="forward", expr=expr(in_set(daddr(), "remote_cidrs"), ACCEPT), comment="fwd")
T1 = NftTable(family="ip", name="magw", sets=(LOCAL, REMOTE), chains=(POST, FWD), rules=(NULL_SNAT, FWD_ACCEPT))

REMOTE2 = NftSet(name="remote_cidrs", type="ipv4_addr", flags=("interval",), elements=("10.3.0.0/16", "10.4.0.1"))
FWD_COUNT = NftRule(
    chain="forward",
    expr=expr(in_set(saddr(), "remote_cidrs"), {"counter": {"packets": 0, "bytes": 0}}, ACCEPT),
    comment="fwd2",
)
T2 = NftTable(family="ip", name="magw", sets=(LOCAL, REMOTE2), chains=(POST, FWD), rules=(FWD_COUNT, NULL_SNAT))

CNI = NftTable(
    family="ip",
    name="cni",
    chains=(NftChain(name="post", type="nat", hook="postrouting", priority=100, policy="accept"),),
    rules=(
        NftRule(
            chain="post",
            expr=expr(
                {"match": {"op": "==", "left": saddr(), "right": {"prefix": {"addr": "10.1.0.0", "len": 16}}}},
                {"masquerade": None},
            ),
        ),
    ),
)

MAPS = NftTable(
    family="ip",
    name="magw",
    sets=(
        NftSet(name="ports", type="inet_service", elements=("4500", "4800")),
        NftSet(name="marks", type="mark", elements=("786432",)),
        NftSet(name="ifaces", type="ifname", elements=("vxlan-tunnel", "vx-submariner")),
        NftSet(name="macs", type="ether_addr", elements=("02:53:f0:12:00:06",)),
        NftSet(name="pairs", type="ipv4_addr . inet_service", elements=("10.0.0.1 . 80", "10.0.0.2 . 443")),
        NftSet(name="ranges", type="inet_service", flags=("interval",), elements=("1000-2000", "80")),
        LOCAL,
    ),
    maps=(
        NftMap(name="egress_ip", type="ipv4_addr", map="ipv4_addr", elements=(("10.1.1.5", "169.254.10.1"),)),
        NftMap(
            name="ns_egress",
            type="ipv4_addr",
            map="ipv4_addr",
            flags=("interval",),
            elements=(("10.1.2.0/24", "169.254.10.2"), ("10.1.3.7", "169.254.10.3")),
        ),
        NftMap(
            name="dispatch",
            type="ipv4_addr",
            map="verdict",
            elements=(("10.2.0.1", "accept"), ("10.2.0.2", "jump sub"), ("10.2.0.3", "drop")),
        ),
    ),
    chains=(POST, FWD, SUB),
    rules=(
        NftRule(
            chain="postrouting",
            expr=expr(
                {"match": {"op": "==", "left": saddr(), "right": "@egress_ip"}},
                {"snat": {"addr": {"map": {"key": saddr(), "data": "@egress_ip"}}}},
            ),
            comment="globalnet egress",
        ),
        NftRule(chain="forward", expr=expr({"vmap": {"key": daddr(), "data": "@dispatch"}})),
        NftRule(chain="forward", expr=expr({"jump": {"target": "sub"}})),
        NftRule(chain="sub", expr=expr(in_set(saddr(), "local_cidrs"), ACCEPT)),
    ),
)


def _with(table: NftTable, **changes: Any) -> NftTable:
    fields = {"sets": table.sets, "maps": table.maps, "chains": table.chains, "rules": table.rules, **changes}
    return NftTable(family=table.family, name=table.name, **fields)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    with open_backend(request.param) as opened:
        yield opened


# ---- the cases ---------------------------------------------------------------------------------------------


def test_apply_then_observe_equals_the_table(backend: Backend) -> None:
    """A table applied on an empty node reads back equal, and nft itself lists the same objects."""
    apply_ok(backend, replace(T1))
    assert backend.driver.observe() == T1
    assert backend.listing("ip", "magw") == expected_listing(T1)


def test_replace_swaps_rules_and_sets_in_one_go(backend: Backend) -> None:
    """Replacing the table leaves exactly the new rules and elements, nothing of the old table."""
    apply_ok(backend, replace(T1))
    apply_ok(backend, replace(T2))
    assert backend.driver.observe() == T2
    assert backend.listing("ip", "magw") == expected_listing(T2)


def test_applying_the_same_table_twice_is_idempotent(backend: Backend) -> None:
    """Replace with an identical table succeeds and changes nothing."""
    apply_ok(backend, replace(T1), replace(T1))
    assert backend.driver.observe() == T1


def test_delete_removes_our_table(backend: Backend) -> None:
    """table=None deletes the table."""
    apply_ok(backend, replace(T1))
    apply_ok(backend, delete())
    assert (backend.driver.observe(), backend.listing("ip", "magw")) == (None, None)


def test_delete_of_a_missing_table_succeeds(backend: Backend) -> None:
    """Deleting a table that does not exist is a success and creates nothing."""
    apply_ok(backend, delete())
    assert (backend.driver.observe(), backend.listing("ip", "magw")) == (None, None)


def test_dangling_set_reference_fails_and_keeps_the_old_table(backend: Backend) -> None:
    """A rule naming a missing set fails the whole transaction: the old table is intact."""
    apply_ok(backend, replace(T1))
    bad = NftRule(chain="forward", expr=expr(in_set(saddr(), "missing"), ACCEPT))
    apply_fails(backend, replace(_with(T2, rules=(*T2.rules, bad))))
    assert backend.driver.observe() == T1
    assert backend.listing("ip", "magw") == expected_listing(T1)


def test_dangling_jump_fails_and_keeps_the_old_table(backend: Backend) -> None:
    """A jump to a missing chain fails the whole transaction."""
    apply_ok(backend, replace(T1))
    apply_fails(
        backend,
        replace(_with(T2, rules=(*T2.rules, NftRule(chain="forward", expr=expr({"jump": {"target": "nope"}}))))),
    )
    assert backend.driver.observe() == T1


def test_rule_in_a_missing_chain_fails(backend: Backend) -> None:
    """A rule whose chain is not in the table fails; nothing is created."""
    apply_fails(backend, replace(_with(T1, rules=(*T1.rules, NftRule(chain="nope", expr=expr(ACCEPT))))))
    assert (backend.driver.observe(), backend.listing("ip", "magw")) == (None, None)


def test_jump_to_a_base_chain_fails(backend: Backend) -> None:
    """A jump into a base chain is refused (kernel: EOPNOTSUPP)."""
    apply_fails(
        backend,
        replace(_with(T1, rules=(*T1.rules, NftRule(chain="postrouting", expr=expr({"jump": {"target": "forward"}}))))),
    )
    assert backend.driver.observe() is None


def test_verdict_map_jump_to_a_missing_chain_fails(backend: Backend) -> None:
    """A verdict-map element that jumps to a missing chain fails the transaction."""
    vmap = NftMap(name="v", type="ipv4_addr", map="verdict", elements=(("10.0.0.1", "jump nope"),))
    apply_fails(backend, replace(_with(T1, maps=(vmap,))))
    assert backend.driver.observe() is None


@pytest.mark.parametrize(
    "chain",
    [
        NftChain(name="forward", type="nat", hook="forward", priority=0, policy="accept"),
        NftChain(name="forward", type="filter", hook="bogus", priority=0, policy="accept"),
        NftChain(name="forward", type="route", hook="input", priority=0, policy="accept"),
    ],
    ids=["nat-on-forward", "unknown-hook", "route-off-output"],
)
def test_base_chain_with_a_bad_hook_fails(backend: Backend, chain: NftChain) -> None:
    """A base chain on a hook its type or family does not have is refused; the old table stays."""
    apply_ok(backend, replace(T1))
    apply_fails(backend, replace(_with(T1, chains=(POST, chain))))
    assert backend.driver.observe() == T1


@pytest.mark.parametrize(
    "chain",
    [
        NftChain(name="forward", type="filter", priority=0, policy="accept"),
        NftChain(name="forward", type="filter", hook="forward", policy="accept"),
        NftChain(name="forward", type="filter", hook="forward", priority=0),
        NftChain(name="forward", policy="drop"),
    ],
    ids=["no-hook", "no-priority", "no-policy", "policy-on-regular"],
)
def test_incomplete_base_chain_is_refused(backend: Backend, chain: NftChain) -> None:
    """Half a base chain is refused (nft would quietly make a regular chain, or ignore/add a policy)."""
    result = apply_fails(backend, replace(_with(T1, chains=(POST, chain))))
    assert "chain forward" in result.failed[0].error
    assert backend.driver.observe() is None


def test_snat_in_a_filter_chain_fails(backend: Backend) -> None:
    """NAT statements are refused outside nat chains (kernel: EOPNOTSUPP)."""
    snat = NftRule(chain="forward", expr=expr({"snat": {"addr": "10.1.1.1"}}))
    apply_fails(backend, replace(_with(T1, rules=(*T1.rules, snat))))
    assert backend.driver.observe() is None


def test_masquerade_in_a_regular_chain_reached_from_filter_fails(backend: Backend) -> None:
    """A regular chain is checked through the base chains that jump to it."""
    rules = (
        NftRule(chain="forward", expr=expr({"jump": {"target": "sub"}})),
        NftRule(chain="sub", expr=expr({"masquerade": None})),
    )
    apply_fails(backend, replace(_with(T1, chains=(POST, FWD, SUB), rules=rules)))
    assert backend.driver.observe() is None


@pytest.mark.parametrize(
    "bad",
    [
        NftSet(name="s", type="ipv4_addr", elements=("hello",)),
        NftSet(name="s", type="inet_service", elements=("10.0.0.1",)),
        NftSet(name="s", type="ipv4_addr", elements=("10.0.0.0/8",)),
        NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.0.0.0/8", "10.1.0.0/16")),
        NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.1.0.1/16",)),
        NftSet(name="s", type="bogus_type", elements=()),
        NftMap(name="s", type="ipv4_addr", map="ipv4_addr", elements=(("10.0.0.1", "80"),)),
        NftMap(name="s", type="ipv4_addr", map="verdict", elements=(("10.0.0.1", "maybe"),)),
    ],
    ids=[
        "hostname-as-address",
        "address-as-port",
        "prefix-without-interval",
        "overlapping-intervals",
        "non-canonical-prefix",
        "unknown-type",
        "map-value-type",
        "bad-verdict",
    ],
)
def test_bad_elements_fail_and_keep_the_old_table(backend: Backend, bad: NftSet | NftMap) -> None:
    """Elements of the wrong type, shape or form are refused; the old table stays."""
    apply_ok(backend, replace(T1))
    if isinstance(bad, NftMap):
        apply_fails(backend, replace(_with(T1, maps=(bad,))))
    else:
        apply_fails(backend, replace(_with(T1, sets=(*T1.sets, bad))))
    assert backend.driver.observe() == T1


def test_map_lookup_on_a_plain_set_is_refused(backend: Backend) -> None:
    """``snat to ip saddr map @a_set`` is refused before libnftables (nft 1.0.6 segfaults on it)."""
    rule = NftRule(
        chain="postrouting", expr=expr({"snat": {"addr": {"map": {"key": saddr(), "data": "@local_cidrs"}}}})
    )
    result = apply_fails(backend, replace(_with(T1, rules=(rule,))))
    assert "which is a set, not a map" in result.failed[0].error


def test_maps_and_sets_round_trip(backend: Backend) -> None:
    """Address maps, interval maps, verdict maps, concatenations, ports, marks, names, MACs: all read back."""
    apply_ok(backend, replace(MAPS))
    assert backend.driver.observe() == MAPS
    assert backend.listing("ip", "magw") == expected_listing(MAPS)


def test_foreign_table_is_untouched(backend: Backend) -> None:
    """Replacing and deleting ours never changes another table, and a change for it is refused."""
    backend.install_foreign(CNI)
    before = backend.listing("ip", "cni")
    assert before == expected_listing(CNI)
    apply_ok(backend, replace(T1), replace(T2), delete())
    result = apply_fails(backend, delete("ip", "cni"))
    assert result.failed[0].error == "refused: table ip cni is not one of ours"
    assert backend.listing("ip", "cni") == before


def test_a_failed_change_does_not_stop_the_next(backend: Backend) -> None:
    """Each change is its own transaction: a refused one is reported, the next still applies."""
    bad = replace(_with(T1, rules=(NftRule(chain="nope", expr=expr(ACCEPT)),)))
    result = backend.driver.apply([bad, replace(T1)])
    assert (result.applied, [f.op for f in result.failed]) == ((replace(T1),), [bad])
    assert backend.driver.observe() == T1


def test_change_with_a_mismatched_table_is_refused(backend: Backend) -> None:
    """An NftChange naming one table and carrying another is refused, nothing is written."""
    other = _with(T1)
    change = NftChange(family="ip", name="magw", table=NftTable(family="ip", name="other", chains=other.chains))
    apply_fails(backend, change)
    assert (backend.listing("ip", "magw"), backend.listing("ip", "other")) == (None, None)


# ---- what nft 1.0.6 refuses while parsing or evaluating a rule (read back from NftDriver in a namespace)

_LOOP_CHAINS = (FWD, SUB, NftChain(name="sub2"))


@pytest.mark.parametrize(
    ("table", "cause"),
    [
        (
            _with(
                T1,
                sets=(NftSet(name="ports", type="inet_service", elements=("80",)),),
                rules=(NftRule(chain="forward", expr=expr(in_set(saddr(), "ports"), ACCEPT)),),
            ),
            "datatype mismatch",
        ),
        (
            _with(
                T1,
                maps=(NftMap(name="v", type="inet_service", map="verdict", elements=(("80", "accept"),)),),
                rules=(NftRule(chain="forward", expr=expr({"vmap": {"key": daddr(), "data": "@v"}})),),
            ),
            "datatype mismatch",
        ),
        (
            _with(
                T1,
                sets=(NftSet(name="pairs", type="ipv4_addr . inet_service", elements=("10.0.0.1 . 80",)),),
                rules=(
                    NftRule(
                        chain="forward",
                        expr=expr(in_set({"concat": [saddr(), {"meta": {"key": "mark"}}]}, "pairs"), ACCEPT),
                    ),
                ),
            ),
            "datatype mismatch",
        ),
        (
            _with(
                T1,
                chains=_LOOP_CHAINS,
                maps=(NftMap(name="back", type="ipv4_addr", map="verdict", elements=(("10.0.0.1", "jump sub"),)),),
                rules=(
                    NftRule(chain="forward", expr=expr({"jump": {"target": "sub"}})),
                    NftRule(chain="sub", expr=expr({"jump": {"target": "sub2"}})),
                    NftRule(chain="sub2", expr=expr({"vmap": {"key": daddr(), "data": "@back"}})),
                ),
            ),
            "Too many links",
        ),
        (
            _with(
                T1,
                chains=_LOOP_CHAINS,
                rules=(
                    NftRule(chain="forward", expr=expr({"jump": {"target": "sub"}})),
                    NftRule(chain="sub", expr=expr({"jump": {"target": "sub2"}})),
                    NftRule(chain="sub2", expr=expr({"goto": {"target": "sub"}})),
                ),
            ),
            "Too many links",
        ),
        (
            _with(T1, rules=(NftRule(chain="forward", expr=expr({"frobnicate": None})),)),
            "Unknown statement object 'frobnicate'",
        ),
        (
            _with(
                T1,
                rules=(
                    NftRule(
                        chain="forward",
                        expr=expr({"match": {"op": "==", "left": {"meta": {"key": "bogus"}}, "right": 1}}, ACCEPT),
                    ),
                ),
            ),
            "syntax error, unexpected bogus, known keys are length, protocol",
        ),
    ],
    ids=[
        "set-datatype-mismatch",
        "vmap-datatype-mismatch",
        "concat-datatype-mismatch",
        "verdict-map-jump-loop",
        "jump-loop",
        "unknown-statement",
        "unknown-meta-key",
    ],
)
def test_what_nft_refuses_in_a_rule_fails_and_keeps_the_old_table(
    backend: Backend, table: NftTable, cause: str
) -> None:
    """A datatype mismatch, a jump loop reached from a base chain, an unknown statement and an unknown meta key
    are refused, naming the cause in nft's words; the old table stays."""
    apply_ok(backend, replace(T1))
    result = apply_fails(backend, replace(table))
    assert cause in result.failed[0].error
    assert backend.driver.observe() == T1


def test_a_jump_loop_no_base_chain_reaches_is_accepted(backend: Backend) -> None:
    """The kernel checks loops from the base chains only: two regular chains jumping at each other, reached
    from nowhere, are accepted."""
    table = _with(
        T1,
        chains=(POST, FWD, SUB, NftChain(name="sub2")),
        rules=(
            NftRule(chain="sub", expr=expr({"jump": {"target": "sub2"}})),
            NftRule(chain="sub2", expr=expr({"jump": {"target": "sub"}})),
        ),
    )
    apply_ok(backend, replace(table))
    assert backend.driver.observe() == table
