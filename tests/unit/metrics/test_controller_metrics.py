"""The Globalnet and egress controllers' metrics, fed by the real controllers over a broker directory."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from magw.controllers.egressgw import ops
from magw.controllers.egressgw.controller import EgressController
from magw.metrics.egress import EgressMetrics
from magw.metrics.globalnet import GlobalnetMetrics
from magw.sources import FileBroker
from magw.sources.file.egressgw_store import EgressStore
from tests.support.broker_docs import BrokerDocuments, egress_vip
from tests.support.globalnet_broker import controller, gateway, make_broker, put, remove

CIDR = {"cidr": "242.1.0.0/24"}
USABLE = 254


def test_globalnet_pool_allocations_and_leaks(tmp_path: Path) -> None:
    """A gateway (the cluster's egress IPs) and a GlobalEgressIP of 2 in a /24 (254 usable: not the network and
    broadcast addresses); then the GlobalEgressIP goes and its status is found ownerless and removed."""
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    put(d, "e1", "GlobalEgressIP", {"namespace": "ns", "name": "e1", "numberOfIPs": 2})
    registry = CollectorRegistry()
    metrics = GlobalnetMetrics(registry)
    ctl = controller(d)
    first = ctl.reconcile()
    metrics.passed(first)
    value = registry.get_sample_value
    egress = value("submariner_global_egress_IP_allocated", CIDR)
    cluster = value("submariner_cluster_global_egress_IP_allocated", CIDR)
    assert egress == 2 and cluster is not None and cluster >= 1
    assert value("submariner_global_IP_allocated", CIDR) == first.pool_used == egress + cluster
    assert value("submariner_global_IP_availability", CIDR) == USABLE - first.pool_used
    assert value("submariner_global_ingress_IP_allocated", CIDR) == 0
    assert value("magw_globalnet_allocations_total") == first.allocated == egress + cluster
    assert value("magw_globalnet_leaks_found_total") == 0
    remove(d, "e1")
    second = ctl.reconcile()
    metrics.passed(second)
    assert second.deleted == 1
    assert value("magw_globalnet_leaks_found_total") == 1
    assert value("submariner_global_egress_IP_allocated", CIDR) == 0
    assert value("submariner_global_IP_availability", CIDR) == USABLE - cluster
    assert value("magw_globalnet_allocations_total") == egress + cluster  # nothing new


def test_egress_holder_changes_and_the_time_without_one(tmp_path: Path, broker_documents: BrokerDocuments) -> None:
    (tmp_path / "base.yaml").write_text(broker_documents("egress-east.yaml"))
    (tmp_path / "vip-a.yaml").write_text(egress_vip("a", 10, "[{namespace: shop}]"))
    now = [1_700_000_000.0]
    ctl = EgressController(source=FileBroker(tmp_path, local_cluster="east"), store=EgressStore(tmp_path, "east"),
                           clock=lambda: now[0])  # fmt: skip
    registry = CollectorRegistry()
    EgressMetrics(registry, ctl)
    ctl.reconcile()
    ctl.report(ops.HolderReport(vip="a", node="n2"))  # none -> n2: how long it had none is not known
    now[0] += 1.5
    ctl.report(ops.HolderReport(vip="a", node="n2", state=ops.VrrpState.FAULT))  # n2 -> none
    now[0] += 0.75
    ctl.report(ops.HolderReport(vip="a", node="n1"))  # none (0.75 s) -> n1
    ctl.report(ops.HolderReport(vip="a", node="n1"))  # no change
    value = registry.get_sample_value
    assert value("magw_egress_vip_holder_changes_total", {"vip": "a"}) == 3
    assert value("magw_egress_vip_holder_change_seconds_count", {"vip": "a"}) == 1
    assert value("magw_egress_vip_holder_change_seconds_sum", {"vip": "a"}) == 0.75
