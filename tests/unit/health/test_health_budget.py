"""The probe budget: a node with few probes per round probes every 30 ms, one with many no faster than the budget
allows, never slower than the interval; and what the defaults make of a dead gateway (docs/health.md, "Timing")."""

from __future__ import annotations

import pytest
import structlog.testing

from magw.health.echoids import ALIVE_ID
from magw.health.params import ProbeParams
from magw.model import Health
from tests.unit.health.test_health_monitor import GW1, GW2, WEST_ID, FakeNet, advance, monitor


@pytest.mark.parametrize(
    ("probes", "interval"),
    [(1, 0.03), (4, 0.03), (30, 0.03), (50, 0.05), (100, 0.1), (404, 0.1)],
)
def test_the_interval_is_the_rounds_probes_over_the_budget_within_min_interval_and_interval(
    probes: int, interval: float
) -> None:
    assert ProbeParams().interval_for(probes) == pytest.approx(interval)


@pytest.mark.parametrize(
    ("answered", "interval"),
    [(6, 0.03), (600, 0.03), (1200, 0.06), (4000, 0.1), (40_000, 0.1)],
)
def test_what_one_gateway_answers_to_the_whole_cluster_stays_within_the_gateway_budget(
    answered: int, interval: float
) -> None:
    """4 probes a round (within the budget: 30 ms), but every node of the cluster probes the same gateway: 150
    workers with 4 ids make it answer 600 echoes a round, 20,000/s at 30 ms; 300 workers, every 60 ms; 1,000
    workers, every 100 ms at most (the interval), where 30 ms would have been 133,000 echoes/s."""
    assert ProbeParams().interval_for(4, answered) == pytest.approx(interval)
    assert ProbeParams(gateway_budget=0).interval_for(4, answered) == pytest.approx(0.03)


def test_no_budget_is_always_the_interval_and_bad_values_are_one_line_each() -> None:
    assert ProbeParams(budget=0).interval_for(1) == 0.1
    assert ProbeParams(interval=0.5, min_interval=0.2, budget=10).interval_for(3) == pytest.approx(0.3)
    with pytest.raises(ValueError, match=r"^probe min interval: must be <= the probe interval 0.1, got 0.2$"):
        ProbeParams(min_interval=0.2)
    with pytest.raises(ValueError, match=r"^probe budget: must be from 0 to 1e\+06 probes per second, got -1"):
        ProbeParams(budget=-1)
    with pytest.raises(ValueError, match=r"^probe min interval: must be > 0 seconds, got 0"):
        ProbeParams(min_interval=0)
    with pytest.raises(ValueError, match=r"^probe gateway budget: must be from 0 to 1e\+06 echoes per second, got -2"):
        ProbeParams(gateway_budget=-2)


def test_a_worker_with_four_probes_per_round_probes_every_30ms_less_jitter() -> None:
    """e-w1 probes 2 gateways with 2 echo ids each: 4 probes a round, far below 1,000/s, so every 27 ms (30 ms less
    half the jitter) from 15 ms: 37 probes per gateway and socket in one second, where the 100 ms interval gave 11."""
    net = FakeNet()
    with structlog.testing.capture_logs() as logs:
        mon = monitor("e-w1", net, [], ProbeParams(startup_grace=0))
    assert [(e["interval"], e["was"]) for e in logs if e["event"] == "health.interval"] == [(0.03, 0.1)]
    advance(mon, net, 1.0)
    for sock in net.sockets.values():
        assert [sum(1 for a, _ in sock.sent if a == gw) for gw in (GW1, GW2)] == [37, 37]


def test_a_worker_counts_every_node_of_its_cluster_against_the_gateway_budget() -> None:
    """The seed's east has 3 nodes, each probing a gateway with 2 ids: 6 echoes a round per gateway. A gateway budget
    of 100 echoes/s makes that every 60 ms (54 with the jitter), from 30 ms: 18 probes per gateway in one second."""
    net = FakeNet()
    mon = monitor("e-w1", net, [], ProbeParams(gateway_budget=100, startup_grace=0))
    assert (mon.plan.probers, mon.plan.answered_per_round, mon.interval) == (3, 6, pytest.approx(0.06))
    advance(mon, net, 1.0)
    assert [sum(1 for a, _ in net.sockets[ALIVE_ID].sent if a == gw) for gw in (GW1, GW2)] == [18, 18]


def test_a_small_budget_slows_probing_to_what_it_allows() -> None:
    """A budget of 100 probes/s and 4 probes a round: every 40 ms (36 ms with the jitter): 28 per second."""
    net = FakeNet()
    mon = monitor("e-w1", net, [], ProbeParams(budget=100, startup_grace=0))
    advance(mon, net, 1.0)
    assert [sum(1 for a, _ in net.sockets[ALIVE_ID].sent if a == gw) for gw in (GW1, GW2)] == [28, 28]


@pytest.mark.parametrize("dies_at", [0.500, 0.507, 0.514, 0.521, 0.528])
def test_with_the_defaults_a_dead_gateway_is_down_within_one_short_interval_and_three_timeouts(dies_at: float) -> None:
    """The first probe after the failure leaves within 27 ms; it and the next two (each sent when the one before
    missed: the 20 ms fast interval is shorter than the 20 ms timeout plus the send) miss 20 ms apart: down 60 ms
    after that first probe, 60-87 ms after the failure, whenever in the interval it comes."""
    net = FakeNet()
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes, ProbeParams(startup_grace=0))
    advance(mon, net, dies_at)
    net.silent |= {(GW1, ALIVE_ID), (GW1, WEST_ID)}
    advance(mon, net, 1.5)
    downs = [(at, h) for at, h in changes if "e-gw1" in h.down]
    assert len(downs) == 1
    assert 0.060 <= downs[0][0] - dies_at <= 0.087 + 1e-6
    assert downs[0][1].down == {"e-gw1"}
