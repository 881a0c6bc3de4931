"""``magw top``'s frame: rates from two readings of the interface counters, the last failover and its cost,
each path's line."""

from __future__ import annotations

from datetime import UTC, datetime

from magw.ops.show.inputs import Inputs, NodeKernel
from magw.ops.top.frame import frame_doc, frame_lines, link_rates, rate_text
from tests.unit.ops.show_fixtures import BUCKETS, GW_STATUS, NEXTHOPS


def _reading(at: float, tx_bytes: int, rx_bytes: int, *, flows: int = 7) -> Inputs:
    links = {"vxlan-tunnel": {"rx_bytes": rx_bytes, "tx_bytes": tx_bytes, "rx_packets": rx_bytes // 100,
                              "tx_packets": tx_bytes // 100}}  # fmt: skip
    kernel = NodeKernel(nexthops=tuple(NEXTHOPS), buckets=tuple(BUCKETS), links=links, flows=flows)
    return Inputs(source="lab t", statuses={"east-gw1": GW_STATUS}, kernels={"east-gw1": kernel}, at=at)


def test_rates_are_counter_differences_over_time() -> None:
    before = {"wan0": {"rx_bytes": 1000, "tx_bytes": 0, "rx_packets": 10, "tx_packets": 0}}
    after = {"wan0": {"rx_bytes": 3000, "tx_bytes": 500, "rx_packets": 30, "tx_packets": 5}}
    assert link_rates(before, after, 2.0) == {"wan0": {"rx_bps": 8000.0, "tx_bps": 2000.0, "rx_pps": 10.0,
                                                       "tx_pps": 2.5}}  # fmt: skip


def test_a_counter_going_backwards_gives_no_rate() -> None:
    """A device made again starts from zero: no negative rate."""
    before = {"vxlan-tunnel": {"rx_bytes": 5000, "tx_bytes": 10, "rx_packets": 5, "tx_packets": 1}}
    after = {"vxlan-tunnel": {"rx_bytes": 100, "tx_bytes": 20, "rx_packets": 1, "tx_packets": 2}}
    assert link_rates(before, after, 1.0) == {}


def test_rate_units() -> None:
    assert (rate_text(999), rate_text(12_500), rate_text(3_400_000), rate_text(2e9)) == (
        "999 bit/s", "12.5 kbit/s", "3.4 Mbit/s", "2.0 Gbit/s"
    )  # fmt: skip


def test_frame_of_a_gateway() -> None:
    doc = frame_doc(_reading(10.0, 0, 0), _reading(11.0, 1_250_000, 250_000))
    (node,) = doc["nodes"]
    assert (node["node"], node["flows"]) == ("east-gw1", 7)
    assert node["rates"]["vxlan-tunnel"]["tx_bps"] == 10_000_000.0
    assert node["last_failover"]["peer"] == "west-gw2"
    assert [p["remote"] for p in node["paths"]] == ["west-gw1", "west-gw2"]
    lines = frame_lines(doc, datetime(2026, 11, 28, 20, 1, 0, tzinfo=UTC))
    assert lines[0] == "magw top - lab t - 20:01:00 UTC - q quits"
    assert lines[2] == (
        "east-gw1 (east)  flows 7  last failover: west-gw2 down 19:59:50 (1m10s ago), detected in 71 ms, "
        "back 20:00:05 (55s ago)"
    )
    assert lines[3].split() == ["vxlan-tunnel", "tx", "10.0", "Mbit/s", "12500", "pkt/s", "rx", "2.0", "Mbit/s",
                                "2500", "pkt/s"]  # fmt: skip
    assert lines[4].split()[:7] == ["->", "west-gw1", "vxlan", "up", "rtt", "0.30/0.25/1.30", "ms"]
    assert lines[4].split()[7:9] == ["share", "75%"]


def test_first_frame_has_no_rates_yet() -> None:
    doc = frame_doc(None, _reading(1.0, 5, 5))
    assert doc["nodes"][0]["rates"] == {}
    assert "    (rates from the next frame on)" in frame_lines(doc, datetime(2026, 11, 28, tzinfo=UTC))
