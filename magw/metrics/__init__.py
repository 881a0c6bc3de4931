"""Prometheus metrics of the daemons beyond the reconcilers' (docs/metrics.md): Submariner's names where the
meaning is the same, and magw's own. ``catalogue`` lists every one; the collectors read the daemons' state at
scrape time, or count events as they happen, never on a packet's path."""
