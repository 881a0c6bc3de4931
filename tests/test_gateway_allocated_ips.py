"""The gateway daemon publishes its own cluster egress addresses (the status of its per-gateway
ClusterGlobalEgressIP) as ``allocated_ips`` in its Endpoint, follows changes, and publishes none without
Globalnet. The Endpoint file is read back as plain YAML."""

from __future__ import annotations

from pathlib import Path

import yaml

from magw.agent.gateway import Gateway
from magw.sources.filebroker import FileBroker
from tests.globalnet_broker import gateway, make_broker, put, remove
from tests.test_globalnet_controller import controller, converge


def endpoint(d: Path, node: str) -> dict[str, object]:
    return dict(yaml.safe_load((d / f"endpoint-east@{node}.yaml").read_text()))


def test_publishes_and_follows_its_cluster_egress_addresses(tmp_path: Path) -> None:
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    gateway(d, "gw2", 7)
    put(d, "tpl", "ClusterGlobalEgressIP", {"name": "cluster-egress.submariner.io", "numberOfIPs": 2})
    converge(controller(d))
    broker = FileBroker(d, local_cluster="east")
    broker.scan()
    gw2 = Gateway(broker=broker, node="gw2", resync_period=60)
    gw2.ensure("test")
    assert endpoint(d, "gw2")["allocated_ips"] == ["242.1.0.3", "242.1.0.4"], "gw2's own block, not gw1's"
    # the template grows to 3: the controller re-allocates, the gateway re-publishes on the broker change
    put(d, "tpl", "ClusterGlobalEgressIP", {"name": "cluster-egress.submariner.io", "numberOfIPs": 3})
    converge(controller(d))
    broker.scan()  # the subscription calls ensure()
    assert len(endpoint(d, "gw2")["allocated_ips"]) == 3  # type: ignore[arg-type]


def test_no_globalnet_no_allocated_ips(tmp_path: Path) -> None:
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    broker = FileBroker(d, local_cluster="east")
    broker.scan()
    Gateway(broker=broker, node="gw1", resync_period=60).ensure("test")
    assert "allocated_ips" not in endpoint(d, "gw1")
    remove(d, "node-gw1")
