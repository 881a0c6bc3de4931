"""prometheus_client objects made from the catalogue's rows (name, help, labels), so a metric is declared once."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from magw.metrics.catalogue import BY_NAME


def counter(name: str, registry: CollectorRegistry | None) -> Counter:
    """The counter ``name`` (as exposed, ``..._total``; prometheus_client adds the suffix itself)."""
    m = BY_NAME[name]
    return Counter(m.name.removesuffix("_total"), m.help, list(m.labels), registry=registry)


def gauge(name: str, registry: CollectorRegistry | None) -> Gauge:
    m = BY_NAME[name]
    return Gauge(m.name, m.help, list(m.labels), registry=registry)


def histogram(name: str, registry: CollectorRegistry | None, buckets: Sequence[float]) -> Histogram:
    m = BY_NAME[name]
    return Histogram(m.name, m.help, list(m.labels), buckets=buckets, registry=registry)


def gauge_family(name: str) -> GaugeMetricFamily:
    """A fresh family of the gauge ``name``, for a collector that reads its values at scrape time."""
    m = BY_NAME[name]
    return GaugeMetricFamily(m.name, m.help, labels=list(m.labels))
