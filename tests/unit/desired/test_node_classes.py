"""A worker's classes of remote clusters (magw.desired.node.classes): which clusters share a group, and its id."""

from __future__ import annotations

import zlib

import pytest

from magw.desired.node.classes import adopted_main, class_group_ids, main_class
from magw.desired.node.ids import group_ids, hashed_slots

MAIN = 0x63FFFFFD
CLUSTERS = [f"c{i:03d}" for i in range(100)]
G1, G2, G3, G4 = 0x60000001, 0x60000002, 0x60000003, 0x60000004


def _ids(usable: dict[str, tuple[int, ...]]) -> dict[str, int]:
    return class_group_ids(usable.items(), CLUSTERS, resilient=True)


def test_steady_state_is_one_class_under_the_main_id() -> None:
    ids = _ids({c: (G1, G2, G3, G4) for c in CLUSTERS})
    assert set(ids.values()) == {MAIN}


@pytest.mark.parametrize("gone", [G1, G2, G3, G4])
def test_a_gateway_down_everywhere_keeps_every_cluster_on_the_main_id(gone: int) -> None:
    """The one-replace property at 100 clusters: a local gateway that dies (or, read backwards, returns)
    changes the members of one group, and the id every route names stays the same."""
    before = _ids({c: (G1, G2, G3, G4) for c in CLUSTERS})
    after = _ids({c: tuple(g for g in (G1, G2, G3, G4) if g != gone) for c in CLUSTERS})
    assert after == before


def test_a_cluster_that_loses_a_gateway_alone_splits_off_under_its_own_id() -> None:
    usable = {c: (G1, G2, G3) for c in CLUSTERS}
    usable["c042"] = (G1, G2)
    ids = _ids(usable)
    own = group_ids(CLUSTERS, resilient=True)["c042"]
    assert ids["c042"] == own != MAIN
    assert {c for c, gid in ids.items() if gid == MAIN} == set(CLUSTERS) - {"c042"}


def test_split_clusters_with_the_same_set_share_the_id_of_the_first() -> None:
    usable = {c: (G1, G2, G3) for c in CLUSTERS}
    usable["c050"] = usable["c007"] = (G2, G3)
    ids = _ids(usable)
    assert ids["c007"] == ids["c050"] == group_ids(CLUSTERS, resilient=True)["c007"]


def test_unreachable_clusters_get_no_id_and_do_not_change_the_others() -> None:
    usable = {c: (G1, G2) for c in CLUSTERS}
    usable["c001"] = ()
    ids = _ids(usable)
    assert "c001" not in ids
    assert set(ids.values()) == {MAIN}


def test_main_class_most_clusters_then_most_members_then_first_cluster() -> None:
    assert main_class({(G1,): ["a", "b"], (G1, G2, G3): ["c"]}) == (G1,)
    assert main_class({(G1,): ["a"], (G2, G3): ["b"]}) == (G2, G3)
    assert main_class({(G2, G3): ["b"], (G1, G2): ["a"]}) == (G1, G2)
    assert main_class({}) is None


def test_the_main_class_moves_only_when_another_outgrows_it() -> None:
    """G3 losing clusters one by one: the main id stays with the clusters that keep G3 while they are more."""
    usable = {c: (G1, G2, G3) for c in CLUSTERS}
    for c in CLUSTERS[:49]:
        usable[c] = (G1, G2)
    ids = _ids(usable)
    assert {c for c, gid in ids.items() if gid == MAIN} == set(CLUSTERS[49:])
    usable[CLUSTERS[49]] = usable[CLUSTERS[50]] = (G1, G2)
    ids = _ids(usable)
    assert {c for c, gid in ids.items() if gid == MAIN} == set(CLUSTERS[:51])


def test_no_cluster_hashes_onto_the_main_id_or_a_probe_id() -> None:
    """A cluster id whose crc32 ends in FFFFFD (the main class) probes past FFFFFE and FFFFFF (the capability
    probes' ids, magw.drivers.netlink.capabilities) and wraps to 0."""
    hit = "x37554188"  # found by counting up "x0", "x1", ... (16M tries on average: too slow for here)
    assert zlib.crc32(hit.encode()) & 0xFFFFFF == 0xFFFFFD
    assert group_ids([hit], resilient=True)[hit] == 0x63000000
    assert hashed_slots([hit], count=0x1000000) == {hit: 0xFFFFFD}  # without the reservation it would


def test_adopted_main_keeps_the_group_the_kernel_holds() -> None:
    """The reserved id if held; else the lowest held id of the strategy's type; else the reserved id."""
    west = group_ids(["west"], resilient=True)["west"]
    assert adopted_main([], resilient=True) == MAIN
    assert adopted_main([west], resilient=True) == west
    assert adopted_main([west, MAIN], resilient=True) == MAIN
    assert adopted_main([west + 1, west], resilient=True) == west
    assert adopted_main([west & 0x62FFFFFF], resilient=True) == MAIN  # an mpath group: not for a resilient plan
    assert adopted_main([0x60000001], resilient=False) == 0x62FFFFFD  # a nexthop, not a group


def test_an_adopted_id_serves_the_main_class_and_its_owner_takes_the_reserved_one() -> None:
    """The kernel held c042's own group (an older build's): the main class keeps it. When c042 itself splits
    off, its class cannot take its own id (the main class has it) and takes the reserved one."""
    c042 = group_ids(CLUSTERS, resilient=True)["c042"]
    usable = {c: (G1, G2, G3) for c in CLUSTERS}
    assert set(class_group_ids(usable.items(), CLUSTERS, resilient=True, main_id=c042).values()) == {c042}
    usable["c042"] = (G1, G2)
    ids = class_group_ids(usable.items(), CLUSTERS, resilient=True, main_id=c042)
    assert ids["c042"] == MAIN
    assert {c for c, gid in ids.items() if gid == c042} == set(CLUSTERS) - {"c042"}
