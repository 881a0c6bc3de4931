"""nft_changes and nftdelta (pure): element-only differences become element deltas, anything else a replace."""

from __future__ import annotations

import random

import attrs
from hypothesis import given
from hypothesis import strategies as st

from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.desired.state import DesiredState
from magw.reconcile.changeset import NftChange
from magw.reconcile.diff import diff, nft_changes
from magw.reconcile.known import carry_out
from magw.reconcile.nftdelta import (
    MapDelta,
    NftElementDelta,
    SetDelta,
    element_delta,
    sorted_differences,
    with_delta,
)

FWD = NftChain(name="forward", type="filter", hook="forward", priority=0, policy="accept")
RULE = NftRule(chain="forward", expr='[{"accept": null}]')
IN = NftSet(name="gn_in", type="ipv4_addr", elements=("10.0.0.1", "10.0.0.2"))
CIDRS = NftSet(name="cidrs", type="ipv4_addr", flags=("interval",), elements=("10.0.0.0/16", "192.168.1.1"))
EGRESS = NftMap(
    name="gn_egress",
    type="ipv4_addr",
    map="ipv4_addr",
    elements=(("10.0.0.1", "169.254.0.1"), ("10.0.0.2", "169.254.0.2")),
)
TABLE = NftTable(family="ip", name="magw", sets=(IN, CIDRS), maps=(EGRESS,), chains=(FWD,), rules=(RULE,))


def _sets(table: NftTable, **elements: tuple[str, ...]) -> NftTable:
    return attrs.evolve(table, sets=[attrs.evolve(s, elements=elements.get(s.name, s.elements)) for s in table.sets])


def _maps(table: NftTable, **elements: tuple[tuple[str, str], ...]) -> NftTable:
    return attrs.evolve(table, maps=[attrs.evolve(m, elements=elements.get(m.name, m.elements)) for m in table.maps])


def test_same_skeleton_gives_one_element_change() -> None:
    """Only elements differ: one NftChange whose delta holds exactly the added and removed elements."""
    desired = _sets(TABLE, gn_in=("10.0.0.2", "10.0.0.3", "10.0.0.4"))
    (change,) = nft_changes(desired, TABLE)
    assert change == NftChange(
        family="ip",
        name="magw",
        table=desired,
        elements=NftElementDelta(
            sets=(SetDelta(name="gn_in", type="ipv4_addr", add=("10.0.0.3", "10.0.0.4"), delete=("10.0.0.1",)),)
        ),
    )
    assert change.describe() == "nft ip magw: +2 -1 elements (gn_in +2 -1)"


def test_map_value_change_is_a_delete_of_the_old_pair_and_an_add_of_the_new() -> None:
    """A key whose value changed: the old pair is deleted and the new one added in the same delta."""
    desired = _maps(
        TABLE, gn_egress=(("10.0.0.1", "169.254.0.9"), ("10.0.0.2", "169.254.0.2"), ("10.0.0.5", "1.1.1.1"))
    )
    (change,) = nft_changes(desired, TABLE)
    assert change.elements == NftElementDelta(
        maps=(
            MapDelta(
                name="gn_egress",
                type="ipv4_addr",
                map="ipv4_addr",
                add=(("10.0.0.1", "169.254.0.9"), ("10.0.0.5", "1.1.1.1")),
                delete=(("10.0.0.1", "169.254.0.1"),),
            ),
        )
    )
    assert change.describe() == "nft ip magw: +2 -1 elements (gn_egress +2 -1)"


def test_interval_replace_is_a_delete_and_an_add_of_the_same_set() -> None:
    """10.0.0.0/16 becoming 10.0.0.0/15 is delete /16 + add /15 (applied in that order by the drivers)."""
    desired = _sets(TABLE, cidrs=("10.0.0.0/15", "192.168.1.1"))
    (change,) = nft_changes(desired, TABLE)
    assert change.elements == NftElementDelta(
        sets=(SetDelta(name="cidrs", type="ipv4_addr", interval=True, add=("10.0.0.0/15",), delete=("10.0.0.0/16",)),)
    )


def test_several_sets_and_maps_in_one_delta_and_describe() -> None:
    """Changes in several sets and a map are one change; its text names each with its counts, by name."""
    desired = _maps(
        _sets(TABLE, gn_in=("10.0.0.1", "10.0.0.2", "10.0.0.7"), cidrs=("10.0.0.0/16",)),
        gn_egress=(("10.0.0.1", "169.254.0.1"), ("10.0.0.2", "169.254.0.2"), ("10.0.0.7", "169.254.0.7")),
    )
    (change,) = nft_changes(desired, TABLE)
    assert change.elements is not None
    assert (change.elements.added, change.elements.deleted) == (2, 1)
    assert change.describe() == "nft ip magw: +2 -1 elements (cidrs -1, gn_egress +1, gn_in +1)"


def test_equal_tables_give_no_change() -> None:
    """Nothing differs: no change at all (a restart of the agent sends nothing)."""
    assert nft_changes(TABLE, attrs.evolve(TABLE)) == ()
    assert nft_changes(None, None) == ()


def _in_place(change: NftChange, desired: NftTable) -> bool:
    """The whole table, no delta: the change is made in place (``magw.reconcile.nftupdate``)."""
    return (change.table, change.elements) == (desired, None) and change.update is not None


def test_rule_change_is_no_delta() -> None:
    """A rule differs (elements too): the whole table, no delta."""
    desired = attrs.evolve(_sets(TABLE, gn_in=("10.0.0.9",)), rules=(RULE, RULE))
    (change,) = nft_changes(desired, TABLE)
    assert _in_place(change, desired)


def test_chain_set_type_flag_or_map_type_change_is_no_delta() -> None:
    """Anything but elements differing is not an element delta: chains, a set's type or flags, a map's value
    type, a set more or less."""
    variants = [
        attrs.evolve(TABLE, chains=(FWD, NftChain(name="sub"))),
        attrs.evolve(TABLE, sets=(attrs.evolve(IN, flags=("interval",)), CIDRS)),
        attrs.evolve(TABLE, sets=(attrs.evolve(IN, type="ipv6_addr", elements=()), CIDRS)),
        attrs.evolve(TABLE, maps=(attrs.evolve(EGRESS, map="mark", elements=()),)),
        attrs.evolve(TABLE, sets=(IN,)),
        attrs.evolve(TABLE, maps=()),
    ]
    for desired in variants:
        (change,) = nft_changes(desired, TABLE)
        assert _in_place(change, desired), desired


def test_constant_set_elements_are_no_delta() -> None:
    """A constant set is sized at creation (the kernel refuses growing it): its changes recreate the set."""
    observed = attrs.evolve(TABLE, sets=(attrs.evolve(IN, flags=("constant",)), CIDRS))
    desired = _sets(observed, gn_in=("10.0.0.1", "10.0.0.2", "10.0.0.3"))
    (change,) = nft_changes(desired, observed)
    assert _in_place(change, desired)
    assert change.update is not None and change.update.delete_sets == ("gn_in",)
    assert nft_changes(_sets(observed, cidrs=()), observed)[0].elements is not None  # other sets: still a delta


def test_table_gone_is_deleted_and_a_new_table_created() -> None:
    """Desired None deletes the observed table; a missing table is created whole; a renamed one both."""
    assert nft_changes(None, TABLE) == (NftChange(family="ip", name="magw", table=None),)
    assert nft_changes(TABLE, None) == (NftChange(family="ip", name="magw", table=TABLE),)
    renamed = attrs.evolve(TABLE, name="magw2")
    assert nft_changes(renamed, TABLE) == (
        NftChange(family="ip", name="magw2", table=renamed),
        NftChange(family="ip", name="magw", table=None),
    )


def test_carry_out_of_an_element_change_is_the_desired_table() -> None:
    """The known state after an element change is the desired table, as after a replace."""
    desired = _maps(_sets(TABLE, gn_in=("10.0.0.3",)), gn_egress=(("10.0.0.1", "1.2.3.4"),))
    changes = diff(DesiredState(nft=desired), DesiredState(nft=TABLE))
    assert changes.nft[0].elements is not None
    assert carry_out(DesiredState(nft=TABLE), changes.nft).nft == desired


def test_with_delta_deletes_map_keys_whatever_their_value() -> None:
    """As in the kernel, a map delete removes the key; the value it names does not matter."""
    delta = NftElementDelta(
        maps=(MapDelta(name="gn_egress", type="ipv4_addr", map="ipv4_addr", delete=(("10.0.0.1", "9.9.9.9"),)),)
    )
    assert with_delta(TABLE, delta).maps[0].elements == (("10.0.0.2", "169.254.0.2"),)


_ADDRS = st.sampled_from([f"10.0.0.{i}" for i in range(12)])
_VALUES = st.sampled_from(["1.1.1.1", "2.2.2.2", "3.3.3.3"])


@given(
    st.frozensets(_ADDRS),
    st.frozensets(_ADDRS),
    st.dictionaries(_ADDRS, _VALUES),
    st.dictionaries(_ADDRS, _VALUES),
)
def test_delta_carried_out_on_observed_gives_desired(
    want_set: frozenset[str], have_set: frozenset[str], want_map: dict[str, str], have_map: dict[str, str]
) -> None:
    """For any two element contents: observed with the delta applied equals desired, adds and deletes
    are disjoint, and an empty delta only happens for equal tables (which give no change at all)."""
    desired = _maps(_sets(TABLE, gn_in=tuple(want_set)), gn_egress=tuple(want_map.items()))
    observed = _maps(_sets(TABLE, gn_in=tuple(have_set)), gn_egress=tuple(have_map.items()))
    delta = element_delta(desired, observed)
    assert delta is not None
    assert with_delta(observed, delta) == desired
    for d in (*delta.sets, *delta.maps):
        assert not set(d.add) & set(d.delete)
    assert bool(delta) == (desired != observed)
    assert len(nft_changes(desired, observed)) == (desired != observed)


def _big(n: int, offset: int) -> NftTable:
    addrs = tuple(f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}" for i in range(offset, offset + n))
    pairs = tuple((a, f"169.254.{(i >> 8) & 255}.{i & 255}") for i, a in enumerate(addrs, start=offset))
    return _maps(_sets(TABLE, gn_in=addrs), gn_egress=pairs)


def test_100k_elements_with_a_few_changes_diff_to_those_changes_only() -> None:
    """A 100k-element set and a 100k-pair map with a few changes: the change carries those elements only. How
    long it takes is a benchmark's business (``benchmarks/globalnet_scale.py``, its diff column), not a unit
    test's: these machines are shared."""
    observed, desired = _big(100_000, 0), _big(100_000, 3)
    (change,) = nft_changes(desired, observed)
    assert change.elements is not None
    assert change.describe() == "nft ip magw: +6 -6 elements (gn_egress +3 -3, gn_in +3 -3)"


def test_100k_new_elements_replace_every_element() -> None:
    """Every element of a 100k-element set replaced (the worst case: 200k elements sorted): an element change
    of all of them, not a table rewrite."""
    observed = _sets(TABLE, gn_in=_big(100_000, 0).sets[1].elements)
    desired = _sets(TABLE, gn_in=_big(100_000, 100_000).sets[1].elements)
    (change,) = nft_changes(desired, observed)
    assert change.describe() == "nft ip magw: +100000 -100000 elements (gn_in +100000 -100000)"


def _naive(want: tuple[str, ...], have: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(sorted(set(want) - set(have))), tuple(sorted(set(have) - set(want)))


def test_blockwise_differences_equal_plain_set_differences() -> None:
    """Sorted inputs of thousands of elements, many blocks, every density of change: the block-wise
    differences are exactly the set differences (adds, deletes), in order."""
    rng = random.Random(12)
    universe = [f"10.0.{i >> 8}.{i & 255}" for i in range(6000)]
    for _ in range(60):
        p_want, p_have, p_both = rng.random(), rng.random(), rng.random()
        want, have = [], []
        for addr in universe:
            if rng.random() < p_both:
                want.append(addr)
                have.append(addr)
            else:
                if rng.random() < p_want:
                    want.append(addr)
                if rng.random() < p_have:
                    have.append(addr)
        w, h = tuple(sorted(want)), tuple(sorted(have))
        assert sorted_differences(w, h) == _naive(w, h)
