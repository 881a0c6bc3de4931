"""magw.util.sorteddiff: what differs between two key-sorted sequences, block by block."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from magw.util.sorteddiff import sorted_changes

items = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2)), max_size=60).map(sorted)


def _key(item: tuple[int, int]) -> int:
    return item[0]


@settings(max_examples=400, deadline=None)
@given(old=items, new=items, block=st.integers(1, 8))
def test_removing_the_first_list_and_adding_the_second_turns_old_into_new(
    old: list[tuple[int, int]], new: list[tuple[int, int]], block: int
) -> None:
    gone, fresh = sorted_changes(old, new, _key, block=block)
    assert Counter(old) - Counter(gone) + Counter(fresh) == Counter(new)
    assert not Counter(gone) - Counter(old)  # only what old holds can leave
    if len({k for k, _ in old}) == len(old) and len({k for k, _ in new}) == len(new):  # keys unique: exact
        assert Counter(gone) == Counter(old) - Counter(new)
        assert Counter(fresh) == Counter(new) - Counter(old)


def test_one_change_among_many_is_found_in_one_block() -> None:
    old = [(i, 0) for i in range(10_000)]
    new = [*old[:5000], (5000, 1), *old[5001:], (20_000, 0)]
    assert sorted_changes(old, new, _key) == ([(5000, 0)], [(5000, 1), (20_000, 0)])
    assert sorted_changes(old, list(old), _key) == ([], [])
