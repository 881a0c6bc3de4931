"""Two RouteAgents and two Gateways in one process: no global metrics registry by default.

A library that other controllers import must not register its metrics in prometheus_client's global
``REGISTRY`` by default: a second ``Gateway`` then crashed with "Duplicated timeseries", and two
``RouteAgent``s silently wrote into the same ``reconciler="route_agent"`` series. Each instance now gets
its own registry unless one is passed (the daemons' ``main()`` passes ``REGISTRY``).
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import REGISTRY

from magw.daemons.gateway.app import Gateway
from magw.daemons.route_agent.app import RouteAgent
from magw.daemons.route_agent.node_driver import LazyDriver, fake_driver
from magw.sources.file.broker import FileBroker
from tests.support.broker_docs import broker_document

DOCS = broker_document("clusters-east-west.yaml") + """\
---
kind: Node
cluster: east
name: e-gw1
ip: 172.18.0.6
cni_ip: 10.1.1.1
gateway: true
---
kind: Node
cluster: east
name: e-gw2
ip: 172.18.0.7
cni_ip: 10.1.2.1
gateway: true
---
kind: Node
cluster: east
name: e-w1
ip: 172.18.0.3
cni_ip: 10.1.3.1
"""

SYNCS = "magw_reconciler_syncs_total"
PUBLICATIONS = "magw_gateway_publications_total"


def broker(directory: Path) -> FileBroker:
    directory.mkdir(exist_ok=True)
    (directory / "clusterset.yaml").write_text(DOCS)
    b = FileBroker(directory, local_cluster="east")
    b.scan()
    return b


def agent(directory: Path, node: str) -> RouteAgent:
    driver = LazyDriver(fake_driver, what="fake")
    return RouteAgent(source=broker(directory), node=node, driver=driver, resync_period=60)


def global_sample(name: str, labels: dict[str, str]) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_two_route_agents_in_one_process_keep_their_own_metrics(tmp_path: Path) -> None:
    """Both agents are built and sync; each registry counts only its own agent's syncs; the global one none."""
    labels = {"reconciler": "route_agent", "mode": "full"}
    before = global_sample(SYNCS, labels)
    first = agent(tmp_path / "a", "e-w1")
    second = agent(tmp_path / "b", "e-gw1")
    assert first.registry is not second.registry
    assert await first.once() == 0
    assert await second.once() == 0
    assert await second.once() == 0
    assert [r.get_sample_value(SYNCS, labels) for r in (first.registry, second.registry) if r is not None] == [1.0, 2.0]
    assert global_sample(SYNCS, labels) == before


def test_two_gateways_in_one_process_keep_their_own_metrics(tmp_path: Path) -> None:
    """A second Gateway no longer crashes with duplicate timeseries; each counts its own publications."""
    before = global_sample(PUBLICATIONS, {"reason": "missing"})
    b = broker(tmp_path)
    gw1 = Gateway(source=b, node="e-gw1", resync_period=60)
    gw2 = Gateway(source=b, node="e-gw2", resync_period=60)
    gw1.ensure("test")
    assert (tmp_path / "endpoint-east@e-gw1.yaml").exists()
    assert [
        r.get_sample_value(PUBLICATIONS, {"reason": "missing"}) for r in (gw1.registry, gw2.registry) if r is not None
    ] == [1.0, None]
    assert global_sample(PUBLICATIONS, {"reason": "missing"}) == before
