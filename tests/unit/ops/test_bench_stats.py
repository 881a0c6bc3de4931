"""Benchmark figures (magw.ops.bench.stats): percentiles of the latency probe's round trips, iperf3's JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from magw.ops.bench.stats import ParseError, parse_iperf3, percentile, summarize_rr

DATA = Path(__file__).parent / "data"


def test_percentile_interpolates_between_ranks() -> None:
    values = [10.0, 20.0, 30.0, 40.0]
    assert percentile(values, 0) == 10.0
    assert percentile(values, 100) == 40.0
    assert percentile(values, 50) == 25.0  # halfway between ranks 1 and 2
    assert percentile(values, 90) == pytest.approx(37.0)  # position 2.7: 30 + 0.7 * 10
    assert percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_summarize_counts_the_lost_and_sorts_the_round_trips() -> None:
    doc = {
        "target": "udp:10.2.3.2:8080",
        "proto": "udp",
        "count": 6,
        "sent": 6,
        "received": 5,
        "rtt_us": [300, 100, 500, 200, 400],
        "error": None,
    }
    lat = summarize_rr(doc)
    assert (lat.sent, lat.received, lat.lost) == (6, 5, 1)
    assert (lat.min_us, lat.p50_us, lat.max_us, lat.mean_us) == (100, 300, 500, 300)
    assert lat.p90_us == 460.0  # position 3.6 of 100..500: 400 + 0.6 * 100
    assert lat.stdev_us == pytest.approx(141.4, abs=0.1)


def test_summarize_refuses_a_run_with_no_answer() -> None:
    with pytest.raises(ParseError, match="none of 3 requests was answered"):
        summarize_rr({"target": "udp:x:1", "proto": "udp", "sent": 3, "rtt_us": [], "error": None})
    with pytest.raises(ParseError, match="connect: refused"):
        summarize_rr({"target": "tcp:x:1", "proto": "tcp", "sent": 0, "rtt_us": [], "error": "connect: refused"})
    with pytest.raises(ParseError, match="no rtt_us"):
        summarize_rr({"sent": 3})


def test_iperf3_error_document_is_one_line() -> None:
    with pytest.raises(ParseError, match=r"^iperf3: unable to connect to server: Connection refused$"):
        parse_iperf3(
            {"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server:\n Connection refused"}
        )
    with pytest.raises(ParseError, match=r"no end\.sum_received"):
        parse_iperf3({"start": {}, "end": {}})


def test_a_real_iperf3_run_two_streams() -> None:
    """iperf3 3.12 -J -t 2 -P 2, east-w1-p1 to west-w1-p1 in a lab (captured 2026-11-28)."""
    t = parse_iperf3(json.loads((DATA / "iperf3-tcp-2streams.json").read_text()))
    assert round(t.received_bps / 1e6, 1) == 3006.2
    assert t.retransmits == 192 and t.streams == 2
    assert (round(t.interval_min_bps / 1e6, 1), round(t.interval_max_bps / 1e6, 1)) == (2438.3, 3579.4)
    assert (t.sender_cpu_percent, t.receiver_cpu_percent) == (31.3, 24.6)
    assert t.received_bytes > 0 and t.sent_bps >= t.received_bps * 0.9


def test_a_real_iperf3_refusal() -> None:
    """iperf3 3.12 -J against a pod where nothing listens (captured 2026-11-28)."""
    with pytest.raises(ParseError, match=r"^iperf3: unable to connect to server: Connection refused$"):
        parse_iperf3(json.loads((DATA / "iperf3-refused.json").read_text()))
