"""The egress gateway controller's metrics (docs/metrics.md): each VIP's holder changes, and how long a VIP was
without a holder when that is known (the previous holder reported it left). Counted as reports arrive."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from magw.controllers.egressgw.controller import EgressController
from magw.metrics.families import counter, histogram

BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)


class EgressMetrics:
    def __init__(self, registry: CollectorRegistry | None, controller: EgressController) -> None:
        self.changes = counter("magw_egress_vip_holder_changes_total", registry)
        self.gap = histogram("magw_egress_vip_holder_change_seconds", registry, BUCKETS)
        controller.on_holder = self.holder

    def holder(self, vip: str, _old: str, _new: str, without: float | None) -> None:
        self.changes.labels(vip=vip).inc()
        if without is not None:
            self.gap.labels(vip=vip).observe(without)
