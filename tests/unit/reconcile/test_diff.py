"""The pure diff engine: what it emits, in which order, and that the fake kernel accepts that order."""

from __future__ import annotations

import attrs
import pytest

from magw.desired.nft.values import NftChain, NftTable
from magw.desired.node.planner import plan
from magw.desired.state import (
    KINDS,
    DesiredState,
    NexthopGroup,
    Route,
    Rule,
)
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.model import Strategy
from magw.reconcile.changeset import ChangeSet, NftChange, Op
from magw.reconcile.diff import diff, nft_changes
from tests.support.diff_objects import GROUP, NH1, NH2, NH3, group, link, nexthop, route, shape, small_state
from tests.support.planner_seed import seed_east, with_health


def converge(start: DesiredState, target: DesiredState) -> FakeNetlink:
    """A fake holding ``start``, then ``diff(target, observed)`` applied: asserts no failure, returns the fake."""
    fake = FakeNetlink(check_prefsrc=False)
    first = fake.apply(diff(start, fake.observe()))
    assert first.failed == ()
    second = fake.apply(diff(target, fake.observe()))
    assert [f.describe() for f in second.failed] == []
    return fake


def test_empty_against_empty_is_no_change() -> None:
    """Nothing desired, nothing observed: an empty, falsy ChangeSet."""
    changes = diff(DesiredState(), DesiredState())
    assert changes == ChangeSet()
    assert bool(changes) is False


def test_missing_object_is_a_create() -> None:
    """A key only in desired becomes one create op carrying the desired object and no ``old``."""
    rule = Rule(priority=100, table=100)
    assert diff(DesiredState(rules=[rule]), DesiredState()).ops == (Op(verb="create", kind="rules", obj=rule),)


def test_different_object_is_a_replace_with_old() -> None:
    """Same key, different fields: one replace carrying the new object and the observed one as ``old``."""
    changes = diff(DesiredState(links=[link(mtu=1400)]), DesiredState(links=[link()]))
    assert changes.ops == (Op(verb="replace", kind="links", obj=link(mtu=1400), old=link()),)


def test_extra_object_is_a_delete() -> None:
    """A key only in observed becomes one delete of the observed object."""
    nh = nexthop(NH1, "240.0.0.2")
    assert diff(DesiredState(), DesiredState(nexthops=[nh])).ops == (Op(verb="delete", kind="nexthops", obj=nh),)


def test_equal_states_give_no_ops() -> None:
    """Equal objects produce nothing, whatever the kind."""
    assert diff(small_state(), small_state()) == ChangeSet()


def test_creates_follow_kinds_order_and_key_order() -> None:
    """From nothing, every op is a create, kinds in forward KINDS order, keys sorted within a kind."""
    state = plan(seed_east(), "e-gw1")
    changes = diff(state, DesiredState())
    kinds = [op.kind for op in changes.ops]
    assert {op.verb for op in changes.ops} == {"create"}
    assert kinds == sorted(kinds, key=KINDS.index)
    for kind in KINDS:
        keys = [op.obj.key for op in changes.ops if op.kind == kind]
        assert keys == sorted(keys)
        assert len(keys) == len(state.of_kind(kind))


def test_deletes_follow_reverse_kinds_order() -> None:
    """To nothing, every op is a delete, kinds in reverse KINDS order (rules first, links last)."""
    changes = diff(DesiredState(), plan(seed_east(), "e-gw1"))
    kinds = [op.kind for op in changes.ops]
    assert {op.verb for op in changes.ops} == {"delete"}
    assert kinds == sorted(kinds, key=lambda k: -KINDS.index(k))
    assert kinds[0] == "rules"
    assert kinds[-1] == "links"


def test_mixed_change_puts_all_creates_and_replaces_before_deletes() -> None:
    """A route moving to a new nexthop: create nexthop, replace group, then delete the old nexthop."""
    observed = small_state()
    desired = small_state(nexthops=[nexthop(NH1, "240.0.0.2"), nexthop(NH3, "240.0.0.4")], groups=[group(NH1, NH3)])
    assert shape(diff(desired, observed)) == [("create", "nexthops"), ("replace", "groups"), ("delete", "nexthops")]
    converge(observed, desired)


def test_failover_is_exactly_one_group_replace() -> None:
    """A remote gateway going down changes only the group's members: one replace, routes untouched."""
    healthy = plan(seed_east(), "e-gw1")
    degraded = plan(with_health(seed_east(), down=["w-gw1"]), "e-gw1")
    changes = diff(degraded, healthy)
    assert shape(changes) == [("replace", "groups")]
    (op,) = changes.ops
    assert op.old is not None and op.old in healthy.groups
    assert op.obj in degraded.groups
    assert shape(diff(healthy, degraded)) == [("replace", "groups")]


def test_gateways_all_withdrawn_moves_routes_to_unreachable_before_deleting_the_group() -> None:
    """Routes become unreachable (replace) before their group and then its nexthops are deleted: never a route
    on a missing group, never a group on a missing nexthop."""
    healthy = plan(seed_east(), "e-gw1")
    snapshot = seed_east()
    dead = plan(attrs.evolve(snapshot, endpoints=[e for e in snapshot.endpoints if e.cluster != "west"]), "e-gw1")
    changes = diff(dead, healthy)  # also the neighbors and FDB entries of west's gateways go
    assert [op for op in shape(changes) if op[1] in ("routes", "groups", "nexthops")] == [
        ("replace", "routes"),
        ("replace", "routes"),
        ("delete", "groups"),
        ("delete", "nexthops"),
        ("delete", "nexthops"),
    ]
    assert {op.obj.type for op in changes.ops if isinstance(op.obj, Route)} == {"unreachable"}
    fake = converge(healthy, dead)
    assert fake.observe() == attrs.evolve(dead, nft=None)


@pytest.mark.parametrize(
    ("before", "after"),
    [(a, b) for a in Strategy for b in Strategy if a != b],
    ids=lambda s: s.value,
)
@pytest.mark.parametrize("node", ["e-w1", "e-gw1"])
def test_strategy_change_applies_to_the_fake_without_failure(node: str, before: Strategy, after: Strategy) -> None:
    """Any strategy change: new objects first, routes moved, old groups/nexthops deleted; the fake accepts it."""
    start = plan(seed_east(before), node)
    target = plan(seed_east(after), node)
    changes = diff(target, start)
    verbs = [op.verb for op in changes.ops]
    assert verbs == sorted(verbs, key=lambda v: v == "delete")  # no early delete needed here
    fake = converge(start, target)
    assert fake.observe() == attrs.evolve(target, nft=None)
    assert diff(target, fake.observe()).ops == ()


def test_strategy_change_creates_new_groups_before_routes_and_deletes_old_ones_after() -> None:
    """Resilient -> group: the new (mpath) groups exist before routes point at them; old ones go last."""
    changes = diff(plan(seed_east(Strategy.GROUP), "e-w1"), plan(seed_east(Strategy.RESILIENT), "e-w1"))
    assert shape(changes) == [
        ("create", "groups"),
        ("replace", "routes"),
        ("replace", "routes"),
        ("delete", "groups"),
    ]


def test_link_vni_change_recreates_the_link_and_everything_on_it() -> None:
    """The kernel cannot change a VNI in place: delete + create the link, then re-emit every dependent."""
    observed = small_state()
    desired = small_state(links=[link(vni=200)])
    changes = diff(desired, observed)
    assert shape(changes) == [
        ("delete", "links"),
        ("create", "links"),
        ("replace", "addresses"),
        ("replace", "neighbors"),
        ("replace", "fdb"),
        ("replace", "nexthops"),
        ("replace", "nexthops"),
        ("replace", "groups"),
        ("replace", "routes"),
    ]
    fake = converge(observed, desired)
    assert fake.observe() == desired


def test_link_mtu_change_is_one_replace_that_keeps_dependents() -> None:
    """MTU/MAC/up change in place: one replace, and the fake keeps everything on the link."""
    observed = small_state()
    desired = small_state(links=[link(mtu=1400, mac="02:53:f0:00:00:09")])
    assert shape(diff(desired, observed)) == [("replace", "links")]
    assert converge(observed, desired).observe() == desired


@pytest.mark.parametrize(
    "new_group",
    [group(NH1, NH2, type="mpath", buckets=0, idle_timer=0), group(NH1, NH2, buckets=64)],
    ids=["type", "buckets"],
)
def test_group_change_the_kernel_refuses_recreates_group_and_its_routes(new_group: NexthopGroup) -> None:
    """Group type or resilient bucket count change: delete + create the group, then re-create its routes."""
    observed = small_state()
    desired = small_state(groups=[new_group])
    assert shape(diff(desired, observed)) == [("delete", "groups"), ("create", "groups"), ("replace", "routes")]
    assert converge(observed, desired).observe() == desired


def test_group_timer_change_is_a_plain_replace() -> None:
    """The kernel changes a resilient group's timers in place: one replace."""
    observed = small_state()
    desired = small_state(groups=[group(NH1, NH2, idle_timer=99)])
    assert shape(diff(desired, observed)) == [("replace", "groups")]
    assert converge(observed, desired).observe() == desired


def test_id_moving_from_group_to_nexthop_is_deleted_early_and_not_twice() -> None:
    """Nexthops and groups share ids: the old group goes before the nexthop takes its id, and only once."""
    observed = small_state()
    taken = nexthop(GROUP, "240.0.0.5")
    desired = small_state(groups=[], nexthops=[*observed.nexthops, taken], routes=[route(nhid=GROUP)])
    changes = diff(desired, observed)
    assert shape(changes) == [("delete", "groups"), ("create", "nexthops"), ("replace", "routes")]
    assert converge(observed, desired).observe() == desired


def test_id_moving_from_nexthop_to_group_drops_it_from_other_groups_first() -> None:
    """A nexthop id becoming a group: delete it at the start of the groups section, re-emit what used it."""
    observed = small_state()
    other = attrs.evolve(group(NH2), id=NH1)
    desired = small_state(nexthops=[nexthop(NH2, "240.0.0.3")], groups=[group(NH2), other])
    changes = diff(desired, observed)
    assert shape(changes) == [
        ("delete", "nexthops"),
        ("create", "groups"),
        ("replace", "groups"),
        ("replace", "routes"),
    ]
    assert converge(observed, desired).observe() == desired


def test_diff_is_deterministic() -> None:
    """The same inputs give the same ChangeSet, op for op."""
    desired, observed = plan(seed_east(), "e-gw1"), plan(seed_east(Strategy.MULTIPATH), "e-w1")
    assert diff(desired, observed) == diff(desired, observed)


TABLE = NftTable(family="ip", name="magw", chains=[NftChain(name="forward")])


def test_nft_equal_tables_give_nothing() -> None:
    """Same table on both sides: no nft change."""
    assert diff(DesiredState(nft=TABLE), DesiredState(nft=TABLE)).nft == ()


def test_nft_new_table_is_one_whole_table_replace() -> None:
    """A missing table: one NftChange carrying the whole desired table."""
    expected = (NftChange(family="ip", name="magw", table=TABLE),)
    assert diff(DesiredState(nft=TABLE), DesiredState()).nft == expected


def test_nft_different_table_is_one_change_in_place() -> None:
    """A table that exists and differs in more than elements: one NftChange carrying the whole desired table and
    the in-place update from the observed one (tests/unit/reconcile/test_nft_update.py has the update's cases)."""
    other = attrs.evolve(TABLE, chains=[NftChain(name="input")])
    (change,) = diff(DesiredState(nft=TABLE), DesiredState(nft=other)).nft
    assert (change.family, change.name, change.table, change.elements) == ("ip", "magw", TABLE, None)
    assert change.update is not None
    assert (change.update.delete_chains, change.update.add_chains) == (("input",), (NftChain(name="forward"),))
    assert change.describe() == "update nft table ip magw in place: -1 chain, +1 chain"


def test_nft_table_no_longer_desired_is_deleted() -> None:
    """Desired None, observed present: one NftChange with table None naming the observed table."""
    assert diff(DesiredState(), DesiredState(nft=TABLE)).nft == (NftChange(family="ip", name="magw", table=None),)


def test_nft_renamed_table_creates_the_new_before_deleting_the_old() -> None:
    """A table under another name: the new one is installed first, then the old one deleted."""
    renamed = attrs.evolve(TABLE, name="magw2")
    assert nft_changes(renamed, TABLE) == (
        NftChange(family="ip", name="magw2", table=renamed),
        NftChange(family="ip", name="magw", table=None),
    )
