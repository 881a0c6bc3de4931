"""The probe book's round-trip statistics (the Gateway status's latencyRTT)."""

from ipaddress import IPv4Address

import pytest

from magw.health.book import ProbeBook


def test_rtt_statistics_of_each_key_for_the_gateway_status() -> None:
    book = ProbeBook(timeout=0.05)
    key = (IPv4Address("240.1.0.6"), 1)
    for sent, rtt in ((0.0, 0.002), (1.0, 0.004), (2.0, 0.003)):
        seq = book.sent(key, sent)
        book.received(key, seq, sent + rtt)
    stats = book.rtt_stats(key)
    assert stats is not None
    got = stats.as_json()
    assert got["last"] == pytest.approx(0.003) and got["min"] == pytest.approx(0.002)
    assert got["max"] == pytest.approx(0.004) and got["average"] == pytest.approx(0.003)
    assert got["stdDev"] == pytest.approx((2 / 3) ** 0.5 / 1000)  # population deviation of 2, 4, 3 ms
    book.forget(frozenset())
    assert book.rtt_stats(key) is None
