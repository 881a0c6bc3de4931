"""Which stale Endpoint files expire and which are kept (magw.sources.file.expiry): a stale file expires only while
every cluster it publishes for has a fresh Endpoint file."""

from __future__ import annotations

from magw.sources.file.expiry import Expiry, expiry

OLD, NEW = 1, 10  # mtimes (ns) against the bound 5
BOUND = 5.0


def test_nothing_stale_nothing_expires() -> None:
    assert expiry({"a": (NEW, frozenset({"east"}))}, BOUND) == Expiry()
    assert expiry({}, BOUND) == Expiry()


def test_a_stale_file_expires_while_its_cluster_has_a_fresh_one_and_is_kept_otherwise() -> None:
    files = {
        "e1": (OLD, frozenset({"east"})),
        "e2": (NEW, frozenset({"east"})),  # east has a fresh one: e1 expires
        "w1": (OLD, frozenset({"west"})),
        "w2": (OLD, frozenset({"west"})),  # west has none: both kept
    }
    assert expiry(files, BOUND) == Expiry(expired=frozenset({"e1"}), kept=frozenset({"w1", "w2"}))


def test_a_file_of_several_clusters_expires_only_when_each_has_a_fresh_one() -> None:
    both = {"ew": (OLD, frozenset({"east", "west"})), "e": (NEW, frozenset({"east"}))}
    assert expiry(both, BOUND) == Expiry(kept=frozenset({"ew"}))  # west has no other
    both["w"] = (NEW, frozenset({"west"}))
    assert expiry(both, BOUND) == Expiry(expired=frozenset({"ew"}))


def test_the_bound_is_exclusive() -> None:
    """A file modified exactly at the bound is not stale (the broker's rule before: older than the TTL)."""
    assert expiry({"a": (5, frozenset({"east"})), "b": (4, frozenset({"east"}))}, BOUND) == Expiry(
        expired=frozenset({"b"})
    )
