"""The Globalnet controller's metrics (docs/metrics.md): the pool under Submariner's names, allocations and
reclaimed leaks under magw's. Set after each pass from what the pass planned; nothing is read at scrape time."""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry

from magw.controllers.globalnet.controller import GlobalnetPassResult
from magw.metrics.families import counter, gauge

# Submariner's metric -> the Globalnet object kind whose statuses hold those addresses
_BY_KIND = {
    "submariner_global_egress_IP_allocated": "GlobalEgressIP",
    "submariner_cluster_global_egress_IP_allocated": "ClusterGlobalEgressIP",
    "submariner_global_ingress_IP_allocated": "GlobalIngressIP",
}


class GlobalnetMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.available = gauge("submariner_global_IP_availability", registry)
        self.allocated = gauge("submariner_global_IP_allocated", registry)
        self.by_kind = {name: gauge(name, registry) for name in _BY_KIND}
        self.waiting = gauge("magw_globalnet_waiting", registry)
        self.allocations = counter("magw_globalnet_allocations_total", registry)
        self.leaks = counter("magw_globalnet_leaks_found_total", registry)

    def passed(self, result: GlobalnetPassResult) -> None:
        """One pass's figures. A pass that did not plan (no snapshot yet) changes nothing."""
        if not result.planned or result.plan is None:
            return
        cidr = ",".join(str(c) for c in result.cidrs)
        self.available.labels(cidr=cidr).set(result.pool_size - result.pool_used)
        self.allocated.labels(cidr=cidr).set(result.pool_used)
        held = Tally[str]()
        for ref, status in result.plan.statuses.items():
            held[ref.kind] += len(status.allocated_ips)
        for name, kind in _BY_KIND.items():
            self.by_kind[name].labels(cidr=cidr).set(held[kind])
        self.waiting.set(result.waiting)
        self.allocations.inc(result.allocated)
        self.leaks.inc(result.deleted)
