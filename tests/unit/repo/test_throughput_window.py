"""benchmarks/throughput.py measures the aggregate only while every client sends (pure part, no lab).

Why: iperf3 clients that start at different times each divide their bytes by their own
window, and the sum of those rates exceeds what the shared link carried.
"""

from __future__ import annotations

from benchmarks.rx_window import Sample, Window, common_window

LINK = 6_250_000  # bytes per second, 50 Mbit/s shared by the pods that are sending
DT = 0.1


def _shared_link(spans: list[tuple[float, float]], until: float) -> list[Sample]:
    """Counters sampled every DT while a link of LINK B/s is split evenly among the pods sending at the time."""
    counters = [0.0] * len(spans)
    samples: list[Sample] = [(0.0, (0,) * len(spans))]
    steps = round(until / DT)
    for k in range(1, steps + 1):
        t0, t1 = (k - 1) * DT, k * DT
        active = [i for i, (a, b) in enumerate(spans) if a <= t0 and t1 <= b]
        for i in active:
            counters[i] += LINK * DT / len(active)
        samples.append((round(t1, 6), tuple(round(c) for c in counters)))
    return samples


def test_staggered_clients_give_the_link_rate_not_the_sum_of_their_rates() -> None:
    spans = [(0.0, 4.0), (1.0, 5.0), (1.0, 5.0), (1.0, 5.0)]  # three start 1 s late, as after a lost SYN
    samples = _shared_link(spans, 5.5)
    window = common_window(samples)
    assert window is not None
    assert (window.start, window.end) == (1.1, 3.9)  # one sample inside each edge
    assert abs(window.bytes / (window.end - window.start) - LINK) < 10
    own_rates = sum(samples[-1][1][i] / (b - a) for i, (a, b) in enumerate(spans))
    assert own_rates > 1.2 * LINK  # what summing iperf3's figures reported


def test_clients_that_never_send_together_have_no_window() -> None:
    assert common_window(_shared_link([(0.0, 2.0), (2.5, 4.0)], 4.5)) is None
    assert common_window([(0.0, (0, 0))]) is None


def test_control_traffic_below_the_threshold_does_not_open_a_pods_span() -> None:
    # pod 1 sends a little control traffic (1 KB per sample) from the start, data from sample 5 on
    samples: list[Sample] = []
    a = b = 0
    for k in range(12):
        samples.append((k * DT, (a, b)))
        a += 100_000
        b += 100_000 if k >= 4 else 1_000
    window = common_window(samples)
    assert window == Window(start=samples[5][0], end=samples[10][0], bytes=2 * 5 * 100_000)
