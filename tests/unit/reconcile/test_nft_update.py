"""The in-place table change (``magw.reconcile.nftupdate``): what it keeps, flushes, deletes and adds.

The property test carries an update out on the observed table with a model of the kernel's commands written here
(``_carry_out``: flush empties a chain, deletes and adds as nft does them), independent of the code under test, and
checks that it always gives the desired table. tests/kernel/test_nft_update.py checks the same against the kernel,
and that packets never miss the rules.
"""

from __future__ import annotations

import json

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.reconcile.nftupdate import TableUpdate, table_update

RAW = NftChain(name="prerouting-raw", type="filter", hook="prerouting", priority=-300, policy="accept")
FWD = NftChain(name="forward", type="filter", hook="forward", priority=0, policy="accept")
OUT = NftChain(name="postrouting-out", type="filter", hook="postrouting", priority=300, policy="accept")
SUB = NftChain(name="sub")
REMOTE = NftSet(name="remote_cidrs", type="ipv4_addr", flags=("interval",), elements=("242.2.0.0/16",))
PEERS = NftSet(name="vxlan_peers", type="ipv4_addr", elements=("172.18.0.11", "172.18.0.12"))
GN_IN = NftMap(name="gn_in", type="ipv4_addr", map="ipv4_addr", elements=(("242.1.0.5", "100.0.0.10"),))


def _uses(name: str, comment: str, chain: str = "prerouting-raw") -> NftRule:
    expr = [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": f"@{name}"}}]
    return NftRule(chain=chain, expr=json.dumps(expr, sort_keys=True), comment=comment)


def _accept(chain: str, comment: str) -> NftRule:
    return NftRule(chain=chain, expr=json.dumps([{"accept": None}]), comment=comment)


REWRITE = _uses("remote_cidrs", "rewrite")
INPUT_GUARD = _uses("vxlan_peers", "guard", chain="forward")
OLD = NftTable(
    family="ip",
    name="magw",
    sets=(REMOTE, PEERS),
    maps=(GN_IN,),
    chains=(RAW, FWD, OUT),
    rules=(REWRITE, INPUT_GUARD, _accept("postrouting-out", "out")),
)


def test_a_new_rule_flushes_only_its_chain_and_keeps_every_set() -> None:
    """The upgrade's case: a rule more in one chain. Only that chain is flushed and gets its rules again; the other
    chains, the interval set and the map are not touched."""
    new = attrs.evolve(OLD, rules=(*OLD.rules, _accept("forward", "more")))
    update = table_update(new, OLD)
    assert update == TableUpdate(flush=("forward",), rules=(INPUT_GUARD, _accept("forward", "more")))
    assert update.describe() == "flush 1 chain, 2 rules"


def test_kept_sets_change_by_their_elements_only() -> None:
    """A rule change beside element changes: the kept set and map keep their kernel objects; only the changed
    elements go, deletes and adds apart."""
    remote = attrs.evolve(REMOTE, elements=("242.2.0.0/16", "242.3.0.0/16"))
    gn_in = attrs.evolve(GN_IN, elements=(("242.1.0.6", "100.0.0.11"),))
    new = attrs.evolve(OLD, sets=(remote, PEERS), maps=(gn_in,), rules=(REWRITE, INPUT_GUARD))
    update = table_update(new, OLD)
    assert update is not None
    assert (update.flush, update.delete_chains, update.add_chains) == (("postrouting-out",), (), ())
    assert (update.delete_sets, update.delete_maps, update.add_sets, update.add_maps) == ((), (), (), ())
    (sd,) = update.elements.sets
    (md,) = update.elements.maps
    assert (sd.name, sd.interval, sd.add, sd.delete) == ("remote_cidrs", True, ("242.3.0.0/16",), ())
    assert (md.add, md.delete) == ((("242.1.0.6", "100.0.0.11"),), (("242.1.0.5", "100.0.0.10"),))
    assert update.rules == ()  # postrouting-out is flushed and has no rule left


def test_new_and_removed_chains_and_sets() -> None:
    """A chain and a set more, a chain and a map less: added and deleted, the rest untouched."""
    cidrs = NftSet(name="cluster_nodes", type="ipv4_addr", elements=("172.17.0.11",))
    new = NftTable(
        family="ip",
        name="magw",
        sets=(REMOTE, PEERS, cidrs),
        chains=(RAW, FWD, SUB),
        rules=(REWRITE, INPUT_GUARD, _uses("cluster_nodes", "sub", chain="sub")),
    )
    update = table_update(new, OLD)
    assert update is not None
    assert (update.flush, update.delete_chains, update.add_chains) == ((), ("postrouting-out",), (SUB,))
    assert (update.delete_maps, update.add_sets, update.rules) == (("gn_in",), (cidrs,), (new.rules[2],))


def test_a_redefined_chain_is_deleted_and_added_with_its_rules() -> None:
    """A base chain whose priority or policy changed cannot change in place: deleted and added again."""
    raw = attrs.evolve(RAW, priority=-299)
    update = table_update(attrs.evolve(OLD, chains=(raw, FWD, OUT)), OLD)
    assert update is not None
    assert (update.flush, update.delete_chains, update.add_chains, update.rules) == (
        (),
        ("prerouting-raw",),
        (raw,),
        (REWRITE,),
    )


def test_a_reshaped_set_flushes_every_chain_that_names_it() -> None:
    """A set whose flags changed is deleted and added again; the chains whose rules name it are flushed and get their
    (unchanged) rules back, or the kernel would refuse deleting a set in use."""
    peers = attrs.evolve(PEERS, flags=("interval",))
    update = table_update(attrs.evolve(OLD, sets=(REMOTE, peers)), OLD)
    assert update is not None
    assert (update.flush, update.delete_sets, update.add_sets, update.rules) == (
        ("forward",),
        ("vxlan_peers",),
        (peers,),
        (INPUT_GUARD,),
    )


def test_a_constant_set_whose_elements_change_is_added_again() -> None:
    """A constant set is sized at creation (the kernel refuses growing it): new elements mean a new set."""
    const = attrs.evolve(PEERS, flags=("constant",))
    old = attrs.evolve(OLD, sets=(REMOTE, const))
    grown = attrs.evolve(const, elements=(*const.elements, "172.18.0.13"))
    update = table_update(attrs.evolve(old, sets=(REMOTE, grown)), old)
    assert update is not None
    assert (update.delete_sets, update.add_sets, update.flush) == (("vxlan_peers",), (grown,), ("forward",))
    assert not update.elements  # no element command for a set that is added again


def test_no_update_for_another_table_or_a_chain_something_jumps_to() -> None:
    """None, so the caller replaces the whole table: another table's key, or a chain that goes or changes while a
    rule or a verdict map of the table jumps to it."""
    assert table_update(attrs.evolve(OLD, name="magw2"), OLD) is None
    jump = NftRule(chain="forward", expr=json.dumps([{"jump": {"target": "sub"}}]))
    with_sub = attrs.evolve(OLD, chains=(*OLD.chains, SUB), rules=(*OLD.rules, jump))
    assert table_update(attrs.evolve(with_sub, chains=OLD.chains, rules=OLD.rules), with_sub) is None
    vmap = NftMap(name="dispatch", type="ipv4_addr", map="verdict", elements=(("10.2.0.2", "jump sub"),))
    by_map = attrs.evolve(OLD, maps=(GN_IN, vmap), chains=(*OLD.chains, SUB))
    assert table_update(attrs.evolve(by_map, chains=(RAW, FWD, OUT, attrs.evolve(SUB, name="sub2"))), by_map) is None


# ---- the property: carried out on the observed table, the update gives the desired one -----------------------


def _carry_out(table: NftTable, u: TableUpdate) -> NftTable:
    """The kernel's effect of the update's commands, in their order (updatecmds' docstring), on ``table``."""
    rules = [r for r in table.rules if r.chain not in {*u.flush, *u.delete_chains}]
    sets = {s.name: s for s in table.sets}
    maps = {m.name: m for m in table.maps}
    for d in u.elements.sets:
        sets[d.name] = attrs.evolve(sets[d.name], elements=(set(sets[d.name].elements) - set(d.delete)) | set(d.add))
    for md in u.elements.maps:
        gone = {k for k, _ in md.delete}
        pairs = {k: v for k, v in maps[md.name].elements if k not in gone} | dict(md.add)
        maps[md.name] = attrs.evolve(maps[md.name], elements=pairs.items())
    chains = {c.name: c for c in table.chains if c.name not in u.delete_chains}
    for name in (*u.delete_sets, *u.delete_maps):
        assert not any(f'"@{name}"' in r.expr for r in rules), f"set {name} deleted while a rule names it: EBUSY"
    for name in u.delete_sets:
        del sets[name]
    for name in u.delete_maps:
        del maps[name]
    for c in u.add_chains:
        assert c.name not in chains, f"chain {c.name} added twice"
        chains[c.name] = c
    for s in u.add_sets:
        assert s.name not in sets, f"set {s.name} added twice"
        sets[s.name] = s
    for m in u.add_maps:
        assert m.name not in maps, f"map {m.name} added twice"
        maps[m.name] = m
    return NftTable(family=table.family, name=table.name, sets=sets.values(), maps=maps.values(),
                    chains=chains.values(), rules=[*rules, *u.rules])  # fmt: skip


CHAINS = [RAW, FWD, OUT, SUB, attrs.evolve(RAW, priority=-290), attrs.evolve(FWD, policy="drop")]
SETS = [REMOTE, PEERS, attrs.evolve(PEERS, flags=("interval",)), attrs.evolve(PEERS, flags=("constant",)),
        NftSet(name="cluster_nodes", type="ipv4_addr")]  # fmt: skip
ELEMENTS = ["172.18.0.11", "172.18.0.12", "172.18.0.13", "10.0.0.0/16"]


@st.composite
def tables(draw: st.DrawFn) -> NftTable:
    chains = {c.name: c for c in draw(st.lists(st.sampled_from(CHAINS), max_size=4))}
    sets = {}
    for s in draw(st.lists(st.sampled_from(SETS), max_size=3)):
        items = draw(st.lists(st.sampled_from(ELEMENTS), max_size=3))
        sets[s.name] = attrs.evolve(s, elements=[e for e in items if "/" not in e or "interval" in s.flags])
    pairs = st.sampled_from([("242.1.0.5", "100.0.0.10"), ("242.1.0.5", "100.0.0.11"), ("242.1.0.6", "100.0.0.12")])
    maps = [attrs.evolve(GN_IN, elements=draw(st.lists(pairs, max_size=1)))] if draw(st.booleans()) else []
    rules = []
    for chain in chains:
        for i in range(draw(st.integers(0, 2))):
            target = draw(st.sampled_from([*sets, None]))
            rules.append(_uses(target, f"{chain}{i}", chain) if target else _accept(chain, f"{chain}{i}"))
    return NftTable(family="ip", name="magw", sets=sets.values(), maps=maps, chains=chains.values(), rules=rules)


@settings(max_examples=300, deadline=None)
@given(tables(), tables())
def test_the_update_carried_out_gives_the_desired_table(observed: NftTable, desired: NftTable) -> None:
    """Whatever the two tables (chains, sets, maps, elements and rules drawn), the update's commands carried out on
    the observed table give exactly the desired one; and a chain or set that stays the same is never touched."""
    update = table_update(desired, observed)
    assert update is not None
    assert _carry_out(observed, update) == desired
    gone = [f'"@{n}"' for n in (*update.delete_sets, *update.delete_maps)]

    def rules_of(table: NftTable, chain: str) -> list[NftRule]:
        return [r for r in table.rules if r.chain == chain]

    def kept(c: NftChain) -> bool:
        old = rules_of(observed, c.name)
        named = any(g in r.expr for r in old for g in gone)
        return c in observed.chains and rules_of(desired, c.name) == old and not named

    untouched = {c.name for c in desired.chains if kept(c)}
    touched = {*update.flush, *update.delete_chains, *(c.name for c in update.add_chains)}
    assert not touched & untouched
    identical = {s.name for s in desired.sets if s in observed.sets}
    assert not identical & {*update.delete_sets, *(s.name for s in update.add_sets)}
    assert all(r.chain in touched for r in update.rules)
