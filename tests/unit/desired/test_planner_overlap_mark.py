"""The planner skips its CIDR overlap check only for the very cluster objects the snapshot loader checked.

``Snapshot.overlaps_checked`` is set by the loader; ``attrs.evolve`` carries it along, so a snapshot given other
clusters (or clusters equal in value but not the same objects) must be checked again. The check is observed by
replacing ``check_cidrs`` with a recorder that then runs the real one.
"""

from __future__ import annotations

from ipaddress import IPv4Network

import attrs
import pytest

from magw.desired.node import planner
from magw.model import Cluster, Snapshot
from magw.snapshot.load import dump_snapshot, parse_snapshot_text
from tests.support.planner_seed import seed_east

NODE = "e-w1"


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the planner ran its own overlap check (the real one runs too)."""
    calls: list[int] = []
    real = planner.check_cidrs

    def recording(snapshot: Snapshot) -> None:
        calls.append(len(snapshot.clusters))
        real(snapshot)

    monkeypatch.setattr(planner, "check_cidrs", recording)
    return calls


def loaded() -> Snapshot:
    return parse_snapshot_text(dump_snapshot(seed_east()))


def overlapping(snapshot: Snapshot) -> Cluster:
    """A new cluster whose pod CIDR lies inside the first remote cluster's."""
    remote = snapshot.remote_clusters[0]
    inside = next(remote.pod_cidrs[0].subnets(new_prefix=remote.pod_cidrs[0].prefixlen + 1))
    return Cluster(id="zz-new", pod_cidrs=[inside], service_cidrs=[IPv4Network("198.18.0.0/24")])


def test_a_loaded_snapshot_is_not_checked_again(checks: list[int]) -> None:
    snapshot = loaded()
    assert snapshot.overlaps_checked_here()
    planner.plan(snapshot, NODE)
    planner.plan(attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, strategy="group")), NODE)
    assert checks == []


def test_other_clusters_are_checked_even_with_the_loaders_mark(checks: list[int]) -> None:
    snapshot = loaded()
    changed = attrs.evolve(snapshot, clusters=[*snapshot.clusters, overlapping(snapshot)])
    assert not changed.overlaps_checked_here()
    with pytest.raises(ValueError, match="overlaps"):
        planner.plan(changed, NODE)
    assert checks == [len(snapshot.clusters) + 1]


def test_equal_clusters_that_are_not_the_checked_objects_are_checked(checks: list[int]) -> None:
    snapshot = loaded()
    copies = tuple(attrs.evolve(c) for c in snapshot.clusters)
    assert copies == snapshot.clusters
    planner.plan(attrs.evolve(snapshot, clusters=copies), NODE)
    assert checks == [len(copies)]


def test_a_snapshot_built_in_code_is_checked(checks: list[int]) -> None:
    snapshot = seed_east()
    assert not snapshot.overlaps_checked_here()
    with pytest.raises(ValueError, match="overlaps"):
        planner.plan(attrs.evolve(snapshot, clusters=[*snapshot.clusters, overlapping(snapshot)]), NODE)
    assert checks == [len(snapshot.clusters) + 1]
