"""FakeNft beyond the shared contract: its readable dump and its foreign tables."""

from __future__ import annotations

import json

import pytest
from structlog.testing import capture_logs

import magw.drivers.nft.fake.ruleset
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.nft.fake.ruleset import NOT_MODELLED, FakeNft
from magw.reconcile.changeset import NftChange

SADDR = {"payload": {"protocol": "ip", "field": "saddr"}}
OURS = NftTable(
    family="ip",
    name="magw",
    sets=(NftSet(name="local_cidrs", type="ipv4_addr", flags=("interval",), elements=("10.1.0.0/16",)),),
    maps=(NftMap(name="v", type="ipv4_addr", map="verdict", elements=(("10.2.0.1", "accept"),)),),
    chains=(
        NftChain(name="postrouting", type="nat", hook="postrouting", priority=90, policy="accept"),
        NftChain(name="forward", type="filter", hook="forward", priority=0, policy="accept"),
    ),
    rules=(
        NftRule(
            chain="postrouting",
            expr=json.dumps(
                [{"match": {"op": "==", "left": SADDR, "right": "@local_cidrs"}}, {"snat": {"addr": SADDR}}],
                sort_keys=True,
            ),
            comment="keep",
        ),
        NftRule(chain="forward", expr=json.dumps([{"vmap": {"key": SADDR, "data": "@v"}}], sort_keys=True)),
    ),
)
FOREIGN = NftTable(
    family="ip",
    name="cni",
    chains=(NftChain(name="post", type="nat", hook="postrouting", priority=100, policy="accept"),),
    rules=(NftRule(chain="post", expr=json.dumps([{"masquerade": None}])),),
)


def test_dump_is_sorted_readable_text() -> None:
    """dump() lists every table by (family, name), sets and maps, then chains with their rules in nft text.

    A rule shape the nft printer does not know (a verdict map lookup) is shown as its exact JSON.
    """
    fake = FakeNft()
    fake.add_foreign(FOREIGN)
    assert fake.apply([NftChange(family="ip", name="magw", table=OURS)]).failed == ()
    vmap = '[{"vmap": {"data": "@v", "key": {"payload": {"field": "saddr", "protocol": "ip"}}}}]'
    assert fake.dump() == (
        "table ip cni\n"
        "  chain post type nat hook postrouting priority 100 policy accept\n"
        "    masquerade\n"
        "table ip magw\n"
        "  set local_cidrs type ipv4_addr flags interval elements { 10.1.0.0/16 }\n"
        "  map v type ipv4_addr : verdict elements { 10.2.0.1 : accept }\n"
        "  chain forward type filter hook forward priority 0 policy accept\n"
        f"    {vmap}\n"
        "  chain postrouting type nat hook postrouting priority 90 policy accept\n"
        '    ip saddr @local_cidrs snat to ip saddr comment "keep"\n'
    )


def test_empty_fake_dumps_nothing() -> None:
    """No tables, no text."""
    assert FakeNft().dump() == ""


def test_foreign_tables_must_be_valid() -> None:
    """add_foreign refuses a table the kernel would refuse, naming the reason."""
    bad = NftTable(family="ip", name="cni", rules=(NftRule(chain="post", expr="[]"),))
    with pytest.raises(ValueError, match="foreign table ip cni: ENOENT: rule in chain post: no such chain"):
        FakeNft().add_foreign(bad)


def test_observe_all_lists_only_our_existing_tables() -> None:
    """With two tables of ours, observe() is the first and observe_all() every one that exists."""
    fake = FakeNft(tables=(("ip", "magw"), ("ip", "magw-extra")))
    fake.add_foreign(FOREIGN)
    extra = NftTable(family="ip", name="magw-extra")
    assert fake.apply([NftChange(family="ip", name="magw-extra", table=extra)]).failed == ()
    assert (fake.observe(), fake.observe_all()) == (None, (extra,))


def test_failures_are_logged_with_the_reason() -> None:
    """A refused change logs fake_nft.apply_failed with the table and the error."""
    with capture_logs() as logs:
        FakeNft().apply([NftChange(family="ip", name="cni", table=None)])
    assert [(e["event"], e["table"], e["error"]) for e in logs] == [
        ("fake_nft.apply_failed", "cni", "refused: table ip cni is not one of ours")
    ]


def test_what_the_fake_does_not_model_is_listed_in_its_doc() -> None:
    """The deliberate gaps of FakeNft are this list, and the module's docstring shows every entry."""
    assert NOT_MODELLED == (
        "datatypes of expressions other than ip/ip6 addresses, ports, ether addresses, ip protocol,"
        " meta mark/iifname/oifname/l4proto, ct mark and their concatenations",
        "payload fields, ct keys and other expressions nft does not know (only statements and meta keys are checked)",
        "malformed arguments of a known statement (nft refuses {'counter': 5}; the fake takes it)",
        "kernel limits: jump depth beyond loops (16 levels), set sizes, rules per chain",
        "nft's exact error texts: the fake names the same cause, mostly in nft's words",
    )
    doc = magw.drivers.nft.fake.ruleset.__doc__ or ""
    assert [item for item in NOT_MODELLED if f"\n- {item}\n" not in doc] == []


@pytest.mark.parametrize(
    ("expr", "error"),
    [
        (
            [{"match": {"op": "==", "left": {"meta": {"key": "mark"}}, "right": "@local_cidrs"}}],
            "EINVAL: rule in chain forward: datatype mismatch, @local_cidrs holds ipv4_addr, the expression is mark",
        ),
        ([{"last": None}], "EINVAL: rule in chain forward: Unknown statement object 'last'."),
        ([{"jump": {"target": "forward"}}], "EOPNOTSUPP: rule in chain forward: jump to base chain forward"),
    ],
    ids=["meta-mark-in-an-address-set", "no-last-statement-in-1.0.6", "self-jump-of-a-base-chain"],
)
def test_refusals_name_the_rule_and_the_cause(expr: list[object], error: str) -> None:
    """The fake's own texts: the rule's chain, then nft's words for the cause."""
    rule = NftRule(chain="forward", expr=json.dumps(expr, sort_keys=True))
    table = NftTable(family="ip", name="magw", sets=OURS.sets, chains=OURS.chains, rules=(rule,))
    result = FakeNft().apply([NftChange(family="ip", name="magw", table=table)])
    assert [f.error for f in result.failed] == [error]


def test_a_foreign_table_nft_would_refuse_is_refused() -> None:
    """add_foreign runs the same checks: an unknown meta key in a foreign table is a ValueError."""
    meta = {"match": {"op": "==", "left": {"meta": {"key": "colour"}}, "right": 1}}
    rule = NftRule(chain="post", expr=json.dumps([meta]))
    with pytest.raises(ValueError, match=r"^foreign table ip cni: EINVAL: .*unexpected colour, known keys are length"):
        FakeNft().add_foreign(NftTable(family="ip", name="cni", chains=FOREIGN.chains, rules=(rule,)))
