"""The lab's WAN shaping: tbf's queue bound is a parameter (benchmarks/throughput.py --latency), 50 ms by default."""

from __future__ import annotations

from magw.lab.build import wiring


def test_tbf_latency_defaults_to_50ms_and_can_be_set() -> None:
    assert wiring.tbf_argv("ns", "50mbit")[-2:] == ["latency", "50ms"]
    argv = wiring.tbf_argv("ns", "50mbit", latency="10ms")
    assert argv[-2:] == ["latency", "10ms"]
    assert argv[:-1] == wiring.tbf_argv("ns", "50mbit")[:-1]  # nothing else changes
