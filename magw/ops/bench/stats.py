"""Pure: what a benchmark run's raw output means. iperf3's JSON (``iperf3 -J``) into a throughput figure, and the
latency probe's round trips (``magw.ops.bench.rrprobe``) into percentiles."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs


class ParseError(ValueError):
    """A tool's output that does not say what was measured (one line)."""


@attrs.frozen(kw_only=True)
class Throughput:
    """One iperf3 TCP test: what the receiver got (the figure), what the sender sent, its retransmits and the
    spread over the 1 s intervals."""

    seconds: float
    received_bps: float
    sent_bps: float
    received_bytes: int
    retransmits: int | None
    streams: int
    interval_min_bps: float
    interval_max_bps: float
    sender_cpu_percent: float | None
    receiver_cpu_percent: float | None

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _num(doc: Mapping[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ParseError(f"iperf3 output: {where}.{key} is missing or not a number")
    return float(value)


def parse_iperf3(doc: Mapping[str, Any]) -> Throughput:
    """The figures of one ``iperf3 -c ... -J`` run; ``ParseError`` when it failed or says nothing."""
    if doc.get("error"):
        raise ParseError(f"iperf3: {' '.join(str(doc['error']).split())}")
    end = doc.get("end")
    if not isinstance(end, Mapping) or not isinstance(end.get("sum_received"), Mapping):
        raise ParseError("iperf3 output: no end.sum_received (not a finished TCP test)")
    received, sent = end["sum_received"], end.get("sum_sent", {})
    rates = [
        _num(i["sum"], "bits_per_second", "intervals[].sum")
        for i in doc.get("intervals", ())
        if isinstance(i, Mapping) and isinstance(i.get("sum"), Mapping) and not i["sum"].get("omitted")
    ]
    cpu = end.get("cpu_utilization_percent") or {}
    streams = doc.get("start", {}).get("test_start", {}).get("num_streams")
    retr = sent.get("retransmits") if isinstance(sent, Mapping) else None
    rx_bps = _num(received, "bits_per_second", "end.sum_received")
    return Throughput(
        seconds=_num(received, "seconds", "end.sum_received"),
        received_bps=rx_bps,
        sent_bps=_num(sent, "bits_per_second", "end.sum_sent") if sent else rx_bps,
        received_bytes=int(_num(received, "bytes", "end.sum_received")),
        retransmits=int(retr) if isinstance(retr, int) else None,
        streams=int(streams) if isinstance(streams, int) else len(end.get("streams", ())) or 1,
        interval_min_bps=min(rates) if rates else rx_bps,
        interval_max_bps=max(rates) if rates else rx_bps,
        sender_cpu_percent=_opt(cpu.get("host_total")),
        receiver_cpu_percent=_opt(cpu.get("remote_total")),
    )


def _opt(value: object) -> float | None:
    return round(float(value), 1) if isinstance(value, int | float) and not isinstance(value, bool) else None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` (0..100) percentile of ascending ``sorted_values``, linearly interpolated between the two
    nearest ranks (numpy's default, 'linear')."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile: q must be in 0..100, got {q}")
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@attrs.frozen(kw_only=True)
class Latency:
    """Round trips of one request/response run, in microseconds; ``lost``: requests never answered."""

    proto: str
    sent: int
    received: int
    min_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    max_us: float
    mean_us: float
    stdev_us: float
    error: str | None = None

    @property
    def lost(self) -> int:
        return self.sent - self.received

    def as_json(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "lost": self.lost}


def summarize_rr(doc: Mapping[str, Any]) -> Latency:
    """The probe's JSON into percentiles; ``ParseError`` when not one request was answered."""
    rtts = doc.get("rtt_us")
    sent = doc.get("sent")
    if not isinstance(rtts, list) or not isinstance(sent, int) or not all(isinstance(r, int) for r in rtts):
        raise ParseError("latency probe output: no rtt_us list or no sent count")
    if not rtts:
        why = doc.get("error") or f"none of {sent} requests was answered"
        raise ParseError(f"latency probe to {doc.get('target')}: {why}")
    values = sorted(float(r) for r in rtts)
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return Latency(
        proto=str(doc.get("proto")),
        sent=sent,
        received=len(values),
        min_us=values[0],
        p50_us=round(percentile(values, 50), 1),
        p90_us=round(percentile(values, 90), 1),
        p99_us=round(percentile(values, 99), 1),
        max_us=values[-1],
        mean_us=round(mean, 1),
        stdev_us=round(math.sqrt(var), 1),
        error=doc.get("error") if isinstance(doc.get("error"), str) else None,
    )
