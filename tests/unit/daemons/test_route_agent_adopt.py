"""The route agent plans a worker's shared group under the id the kernel held when it started
(magw.desired.node.classes, "Adopting the kernel's group"): a restart or an upgrade from a build that made one
group per cluster moves no route."""

from __future__ import annotations

from pathlib import Path

from benchmarks.event_latency import WORKER, write_broker
from magw.daemons.route_agent.app import RouteAgent
from magw.daemons.route_agent.node_driver import LazyDriver, fake_driver
from magw.desired.node.ids import group_ids
from magw.sources.file.broker import FileBroker

CLUSTERS = [f"c{r}" for r in range(1, 101)]  # event_latency's broker: 100 remote clusters, one gateway each


def _planned_group_ids(tmp_path: Path, held: frozenset[int]) -> set[int]:
    write_broker(tmp_path, 200)
    source = FileBroker(tmp_path, local_cluster="east")
    source.scan()
    agent = RouteAgent(
        source=source, node=WORKER[0], driver=LazyDriver(fake_driver, what="fake"), resync_period=60, held_groups=held
    )
    state = agent.plan()
    assert state is not None
    routes = {r.nhid for r in state.routes}
    assert routes == {g.id for g in state.groups}  # every route names the one group
    return routes


def test_a_fresh_node_gets_the_reserved_id(tmp_path: Path) -> None:
    assert _planned_group_ids(tmp_path, frozenset()) == {0x63FFFFFD}


def test_the_held_group_of_an_older_build_is_kept(tmp_path: Path) -> None:
    """An older build left 100 groups, one per cluster: the lowest id is kept for all 100 clusters."""
    held = frozenset(group_ids(CLUSTERS, resilient=True).values())
    assert _planned_group_ids(tmp_path, held) == {min(held)}
