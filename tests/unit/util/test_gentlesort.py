"""``sorted_in_steps`` gives what ``sorted(set(items))`` gives, for every size around its run length."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magw.util import gentlesort
from magw.util.gentlesort import sorted_in_steps


@given(st.lists(st.tuples(st.integers(0, 50), st.text(max_size=3))))
def test_small_inputs_as_sorted_set(items: list[tuple[int, str]]) -> None:
    assert sorted_in_steps(items) == sorted(set(items))


@pytest.mark.parametrize("size", [0, 1, gentlesort.RUN - 1, gentlesort.RUN, gentlesort.RUN + 1, 5 * gentlesort.RUN + 7])
def test_sizes_around_the_run_length(size: int) -> None:
    rng = random.Random(size)
    items = [f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}" for _ in range(size)]
    items += items[: size // 3]  # repeats
    assert sorted_in_steps(items) == sorted(set(items))
