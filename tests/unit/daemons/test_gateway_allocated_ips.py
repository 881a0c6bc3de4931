"""The gateway daemon publishes its own cluster egress addresses (the status of its per-gateway
ClusterGlobalEgressIP) as ``allocated_ips`` in its Endpoint, follows changes, and publishes none without
Globalnet. The Endpoint file is read back as plain YAML."""

from __future__ import annotations

from pathlib import Path

import yaml

from magw.daemons.gateway.app import Gateway
from magw.sources.file.broker import FileBroker
from tests.support.globalnet_broker import controller, converge, gateway, make_broker, put, remove


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
    gw2 = Gateway(source=broker, node="gw2", resync_period=60)
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
    Gateway(source=broker, node="gw1", resync_period=60).ensure("test")
    assert "allocated_ips" not in endpoint(d, "gw1")
    remove(d, "node-gw1")


def test_publishes_its_blocks_of_global_egress_ips_too(tmp_path: Path) -> None:
    """A GlobalEgressIP holds addresses per gateway: each gateway publishes its own block beside its cluster
    egress addresses, so that replies to those sources are routed back to it (docs/globalnet.md)."""
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    gateway(d, "gw2", 7)
    put(d, "tpl", "ClusterGlobalEgressIP", {"name": "cluster-egress.submariner.io", "numberOfIPs": 2})
    put(d, "ns", "Namespace", {"name": "shop"})
    put(d, "geip", "GlobalEgressIP", {"namespace": "shop", "name": "all", "numberOfIPs": 1})
    converge(controller(d))
    broker = FileBroker(d, local_cluster="east")
    broker.scan()
    published = {}
    for node in ("gw1", "gw2"):
        Gateway(source=broker, node=node, resync_period=60).ensure("test")
        published[node] = set(endpoint(d, node)["allocated_ips"])  # type: ignore[arg-type]
    # 2 cluster egress addresses each plus 1 of the GlobalEgressIP each, and no address published twice
    assert [len(v) for v in published.values()] == [3, 3]
    assert published["gw1"].isdisjoint(published["gw2"])
    snapshot = broker.snapshot
    assert snapshot is not None
    (status,) = [s for r, s in snapshot.globalnet.statuses if r.kind == "GlobalEgressIP"]
    for block in status.gateways:
        assert {str(ip) for ip in block.ips} <= published[block.node]
