"""The diff's shortcut for kinds whose tuple is the very same object on both sides (docs/performance.md).

The reconciler's known state keeps the planner's tuples once they settled (``magw.reconcile.known.after_apply``)
and the planner's memo hands the same tuple back while nothing under it changed. The diff then skips such
a kind. The oracle here is the same diff given copies (equal, not identical tuples), which takes the path
every other diff test checks: the shortcut must never change a ChangeSet.
"""

from __future__ import annotations

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magw.desired.nft.values import NftChain, NftTable
from magw.desired.node.planner import plan
from magw.desired.state import KINDS, DesiredState
from magw.model import Snapshot
from magw.reconcile.changeset import NftChange, Op
from magw.reconcile.diff import diff
from magw.reconcile.known import after_apply
from tests.support.diff_objects import GROUP, NH1, NH2, group, link, nexthop, route, shape, small_state
from tests.support.strategies import snapshot_and_node

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def copied(state: DesiredState) -> DesiredState:
    """``state`` with every kind an equal tuple that is not the same object."""
    return attrs.evolve(state, **{kind: list(state.of_kind(kind)) for kind in KINDS})


def sharing(observed: DesiredState, desired: DesiredState, kinds: frozenset[str]) -> DesiredState:
    """``observed`` holding ``desired``'s very tuples in ``kinds``."""
    return attrs.evolve(observed, **{kind: desired.of_kind(kind) for kind in kinds})


def _plan(snapshot: Snapshot, node: str) -> DesiredState | None:
    try:
        return plan(snapshot, node)
    except (KeyError, ValueError):
        return None


@SETTINGS
@given(snapshot_and_node(), snapshot_and_node(), st.sets(st.sampled_from(KINDS)))
def test_sharing_tuples_never_changes_the_changeset(
    before: tuple[Snapshot, str], after: tuple[Snapshot, str], kinds: set[str]
) -> None:
    old, new = _plan(*before), _plan(after[0], after[1])
    if old is None or new is None:
        return
    # Any kind may be shared, equal or not: sharing makes both sides hold the desired tuple, as after a settle.
    observed = sharing(old, new, frozenset(kinds))
    assert diff(new, observed) == diff(new, copied(observed))


def reusing(observed: DesiredState, desired: DesiredState) -> DesiredState:
    """``observed`` holding ``desired``'s very object wherever the two hold equal objects, as the known state
    does after the planner's memo handed objects back."""
    changes = {}
    for kind in KINDS:
        mine = {obj: obj for obj in desired.of_kind(kind)}
        changes[kind] = [mine.get(obj, obj) for obj in observed.of_kind(kind)]
    return attrs.evolve(observed, **changes)


@SETTINGS
@given(snapshot_and_node(), snapshot_and_node())
def test_sharing_objects_never_changes_the_changeset(before: tuple[Snapshot, str], after: tuple[Snapshot, str]) -> None:
    old, new = _plan(*before), _plan(after[0], after[1])
    if old is None or new is None:
        return
    observed = reusing(old, new)
    assert diff(new, observed) == diff(new, copied(observed))
    assert diff(new, reusing(new, new)).ops == ()


def test_a_shared_kind_is_still_emitted_again_when_a_recreated_link_drops_it() -> None:
    """The routes are the same tuple on both sides, but the link under them is recreated (its VNI changes):
    the kernel drops the routes with it, so they must be re-emitted."""
    desired = small_state(links=[link(vni=200)])
    observed = sharing(small_state(), desired, frozenset({"routes", "groups", "nexthops", "addresses"}))
    changes = diff(desired, observed)
    assert ("replace", "routes") in shape(changes)
    assert changes == diff(desired, copied(observed))


def test_an_id_leaving_the_groups_is_seen_when_the_nexthops_are_shared() -> None:
    """Nexthops and groups share one id space: a group going away whose id a (shared) nexthop holds is
    deleted early, exactly as without the shortcut."""
    taken = nexthop(GROUP, "240.0.0.5")
    desired = small_state(groups=[], nexthops=[nexthop(NH1, "240.0.0.2"), nexthop(NH2, "240.0.0.3"), taken])
    observed = sharing(small_state(routes=desired.routes), desired, frozenset({"nexthops", "routes"}))
    changes = diff(desired, observed)
    assert changes == diff(desired, copied(observed))
    assert shape(changes)[0] == ("delete", "groups")


def test_an_identical_nft_table_is_no_change() -> None:
    table = NftTable(family="ip", name="magw")
    state = small_state(nft=table)
    assert diff(state, attrs.evolve(state, nft=table)).nft == ()


# ----- after_apply: what the known state keeps after an apply ----------------------------------------------


def test_after_apply_takes_the_desired_tuples_of_every_kind_without_an_unsettled_operation() -> None:
    observed = small_state()
    desired = small_state(groups=[group(NH1)], nft=NftTable(family="ip", name="magw"))
    op = Op(verb="replace", kind="groups", obj=desired.groups[0], old=observed.groups[0])
    nft = NftChange(family="ip", name="magw", table=desired.nft)
    known = after_apply(observed, desired, [op, nft], ())
    for kind in KINDS:
        assert known.of_kind(kind) is desired.of_kind(kind), kind
    assert known.nft is desired.nft
    assert diff(desired, known).ops == ()


def test_after_apply_keeps_the_known_objects_of_a_kind_with_a_failed_or_held_back_operation() -> None:
    observed = small_state()
    desired = small_state(groups=[group(NH1)], routes=[route(), route(dst=route().dst.supernet(), nhid=GROUP)])
    failed = Op(verb="replace", kind="groups", obj=desired.groups[0], old=observed.groups[0])
    created = Op(verb="create", kind="routes", obj=desired.routes[0])
    known = after_apply(observed, desired, [created], [failed])
    assert known.groups == observed.groups  # the replace did not happen: the next diff must try it again
    assert known.routes is desired.routes
    assert diff(desired, known).ops == (
        Op(verb="replace", kind="groups", obj=desired.groups[0], old=observed.groups[0]),
    )


def test_after_apply_keeps_an_nft_table_whose_change_did_not_happen() -> None:
    table = NftTable(family="ip", name="magw")
    observed = small_state(nft=table)
    desired = small_state(nft=table, extra_nft=[NftTable(family="ip", name="magw-egress")])
    pending = NftChange(family="ip", name="magw-egress", table=desired.extra_nft[0])
    known = after_apply(observed, desired, (), [pending])
    assert known.nft is desired.nft
    assert known.extra_nft == ()  # the extra table was not made: still missing for the next diff
    assert diff(desired, known).nft == (pending,)


def test_after_apply_keeps_the_main_table_when_its_change_did_not_happen() -> None:
    observed = small_state(nft=NftTable(family="ip", name="magw"))
    desired = small_state(nft=None)
    pending = NftChange(family="ip", name="magw", table=None)  # the delete was deferred (inputs not synced)
    known = after_apply(observed, desired, (), [pending])
    assert known.nft == observed.nft
    assert diff(desired, known).nft == (pending,)
    assert after_apply(observed, desired, [pending], ()).nft is None


def test_after_apply_keeps_the_main_table_when_its_replace_failed() -> None:
    observed = small_state(nft=NftTable(family="ip", name="magw"))
    chain = NftChain(name="input", type="filter", hook="input", priority=0, policy="accept")
    desired = small_state(nft=NftTable(family="ip", name="magw", chains=[chain]))
    (failed,) = diff(desired, observed).nft
    known = after_apply(observed, desired, (), [failed])
    assert known.nft is observed.nft
    assert diff(desired, known).nft == (failed,)


def test_after_apply_carries_out_what_was_applied_in_a_kind_with_a_failure() -> None:
    observed = small_state()
    moved, extra = route(nhid=NH1), route(dst=route().dst.supernet())
    desired = small_state(routes=[moved, extra])
    failed = Op(verb="replace", kind="routes", obj=moved, old=route())
    created = Op(verb="create", kind="routes", obj=extra)
    known = after_apply(observed, desired, [created], [failed])
    assert set(known.routes) == {route(), extra}  # the create carried out, the failed replace not
    assert diff(desired, known).ops == (failed,)
