"""The route agent names the remote clusters it plans by fail static (every gateway toward them down, all kept:
docs/planner.md) in its status file and its log, when they start and when they end, and counts them in
``magw_fail_static_clusters``."""

from __future__ import annotations

import os
from pathlib import Path

from structlog.testing import capture_logs

from magw.daemons.route_agent.app import RouteAgent
from magw.daemons.route_agent.node_driver import LazyDriver, fake_driver
from magw.desired.node.paths import fail_static_clusters
from magw.sources.file.broker import FileBroker
from tests.support.filebroker_world import populate, write
from tests.support.planner_seed import seed_east, with_health


def _agent(directory: Path, node: str) -> tuple[RouteAgent, FileBroker]:
    source = FileBroker(directory, local_cluster="east")
    source.scan()
    agent = RouteAgent(source=source, node=node, driver=LazyDriver(fake_driver, what="fake"), resync_period=60)
    return agent, source


def test_status_and_log_name_the_clusters_planned_by_fail_static(tmp_path: Path) -> None:
    populate(tmp_path)
    agent, source = _agent(tmp_path, "e-gw1")
    with capture_logs() as logs:
        assert agent.plan() is not None
        assert agent.status_json(None)["fail_static"] == []
        write(tmp_path, "health.yaml", "kind: Health\ndown: [w-gw1]\n")  # west's only gateway
        source.scan()
        state = agent.plan()
        assert state is not None and {r.type for r in state.routes} == {"unicast"}  # kept, not unreachable
        assert agent.status_json(None)["fail_static"] == ["west"]
        assert agent.registry is not None
        assert agent.registry.get_sample_value("magw_fail_static_clusters") == 1
        assert agent.plan() is not None  # the same again: logged once
        os.remove(tmp_path / "health.yaml")
        source.scan()
        assert agent.plan() is not None
        assert agent.status_json(None)["fail_static"] == []
        assert agent.registry.get_sample_value("magw_fail_static_clusters") == 0
    events = [(e["event"], e.get("clusters")) for e in logs if e["event"].startswith("route_agent.fail_static")]
    assert events == [("route_agent.fail_static", ["west"]), ("route_agent.fail_static_ended", ["west"])]


def test_fail_static_clusters_on_a_worker_and_a_gateway() -> None:
    """A worker: every local gateway down, or none reaching west; a gateway: every remote gateway down. One of
    two gateways down is a plain failover, not fail static."""
    assert fail_static_clusters(seed_east(), "e-w1") == ()
    assert fail_static_clusters(with_health(seed_east(), down=["e-gw1", "e-gw2"]), "e-w1") == ("west",)
    assert fail_static_clusters(with_health(seed_east(), reach={"e-gw1": [], "e-gw2": []}), "e-w1") == ("west",)
    assert fail_static_clusters(with_health(seed_east(), reach={"e-gw1": []}), "e-w1") == ()
    assert fail_static_clusters(with_health(seed_east(), down=["w-gw1"]), "e-gw1") == ()
    assert fail_static_clusters(with_health(seed_east(), down=["w-gw1", "w-gw2"]), "e-gw1") == ("west",)
