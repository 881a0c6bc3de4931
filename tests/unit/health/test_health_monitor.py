"""The health monitor with fake sockets and clock: detection time, fast replan signal, liveness ids, retargeting."""

from __future__ import annotations

from ipaddress import IPv4Address

import attrs
import pytest
import structlog.testing

from magw.health.echoids import ALIVE_ID, reach_ids
from magw.health.monitor import HealthMonitor
from magw.health.params import LivenessParams, ProbeParams
from magw.health.probe import Reply
from magw.model import Health
from tests.support.planner_seed import seed_east

# The timings below were worked out for one fixed interval: 100 ms, 30 ms in transition, no budget (a handful of
# peers would be probed every 30 ms under the default budget: tests/unit/health/test_health_budget.py).
CLASSIC = {"fast_interval": 0.03, "budget": 0.0}


def classic(**kwargs: float) -> ProbeParams:
    return ProbeParams(**{**CLASSIC, **kwargs})  # type: ignore[arg-type]


WEST_ID = reach_ids(["west"])["west"]
GW1, GW2 = IPv4Address("240.18.0.6"), IPv4Address("240.18.0.8")
W_GW1, W_GW2 = IPv4Address("241.18.0.4"), IPv4Address("241.18.0.9")
RTT = 0.001


@attrs.define
class FakeNet:
    """Which (VTEP, echo id) answer, and the sockets the monitor opened."""

    silent: set[tuple[IPv4Address, int]] = attrs.field(factory=set)
    delay: dict[IPv4Address, float] = attrs.field(factory=dict)  # extra seconds on each reply (a queue)
    sockets: dict[int, FakeSocket] = attrs.field(factory=dict)
    clock: float = 0.0

    def socket(self, echo_id: int) -> FakeSocket:
        sock = FakeSocket(net=self, echo_id=echo_id)
        self.sockets[echo_id] = sock
        return sock


@attrs.define
class FakeSocket:
    net: FakeNet
    echo_id: int
    queued: list[Reply] = attrs.field(factory=list)
    sent: list[tuple[IPv4Address, int]] = attrs.field(factory=list)
    closed: bool = False

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        self.closed = True

    def send(self, address: IPv4Address, seq: int) -> bool:
        self.sent.append((address, seq))
        if (address, self.echo_id) not in self.net.silent:
            at = self.net.clock + RTT + self.net.delay.get(address, 0.0)
            self.queued.append(Reply(address=address, seq=seq, at=at))
        return True

    def replies(self) -> list[Reply]:
        ready = [r for r in self.queued if r.at <= self.net.clock]
        self.queued = [r for r in self.queued if r.at > self.net.clock]
        return ready


def monitor(
    node: str, net: FakeNet, changes: list[tuple[float, Health]], params: ProbeParams | None = None, **snap: bool
) -> HealthMonitor:
    mon = HealthMonitor(
        node,
        probe=params or classic(startup_grace=0),
        liveness=LivenessParams(),
        on_change=lambda h: changes.append((net.clock, h)),
        rng=lambda: 0.5,  # every interval is 90 ms (100 ms less half the 20% jitter), first probe at 50 ms,
        clock=lambda: net.clock,  # every fast interval 27 ms
        sockets=net.socket,  # type: ignore[arg-type]  # the fake has the EchoSocket methods the monitor uses
    )
    mon.update(seed_east(**snap))
    return mon


def advance(mon: HealthMonitor, net: FakeNet, until: float) -> None:
    """Tick the monitor at every time it asks for (and when each reply arrives)."""
    while net.clock < until:
        wake = mon.tick(net.clock)
        arrivals = [r.at for sock in net.sockets.values() for r in sock.queued if r.at > net.clock]
        nxt = min(x for x in (wake, net.clock + RTT, *arrivals) if x is not None)
        net.clock = min(max(nxt, net.clock + 1e-6), until)


def test_worker_opens_one_socket_per_echo_id_and_probes_each_gateway_every_interval() -> None:
    """Over one second, each socket (id 1, west's id) sends 11 probes (every 90 ms from 50 ms) to each gateway."""
    net = FakeNet()
    mon = monitor("e-w1", net, [])
    advance(mon, net, 1.0)
    assert sorted(net.sockets) == [ALIVE_ID, WEST_ID]
    for sock in net.sockets.values():
        assert [sum(1 for a, _ in sock.sent if a == gw) for gw in (GW1, GW2)] == [11, 11]
    assert mon.health == Health(reach={"e-gw1": {"west"}, "e-gw2": {"west"}})


def test_dead_gateway_is_reported_once_at_the_third_miss() -> None:
    """e-gw1 stops answering at 0.52 s. The probe at 0.59 misses at 0.61; the next ones go out at the fast
    interval after the last one (0.617, 0.644) and miss; on_change fires once, 20 ms after the third one (its
    timeout), with e-gw1 down: 144 ms after the failure. Nothing before; nothing more while it stays dead, and
    the dead peer is back on the normal interval (two probes more than e-gw2 in two seconds, not dozens)."""
    net = FakeNet()
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes)
    advance(mon, net, 0.52)
    assert changes == [(0.0, Health(reach={"e-gw1": {"west"}, "e-gw2": {"west"}}))]
    net.silent |= {(GW1, ALIVE_ID), (GW1, WEST_ID)}
    advance(mon, net, 2.0)
    assert len(changes) == 2
    at, health = changes[1]
    assert round(at, 3) == 0.664
    assert health.down == {"e-gw1"}
    assert dict(health.reach) == {"e-gw1": frozenset(), "e-gw2": frozenset({"west"})}
    sent = net.sockets[ALIVE_ID].sent
    assert sum(1 for a, _ in sent if a == GW1) - sum(1 for a, _ in sent if a == GW2) in (1, 2)


@pytest.mark.parametrize(
    "params",
    [
        ProbeParams(startup_grace=0),  # the defaults: every 30 ms (the budget), 20 ms in transition
        classic(startup_grace=0),  # a fast probe 27 ms after the last one
        classic(fast_interval=0.02, startup_grace=0),
        classic(interval=0.08, fast_interval=0.02, startup_grace=0),
        classic(interval=0.03, fast_interval=0.02, startup_grace=0),
        classic(interval=0.025, fast_interval=0.025, startup_grace=0),
    ],
    ids=["defaults", "classic", "fast-20ms", "interval-80ms-fast-20ms", "interval-30ms-fast-20ms", "interval-25ms"],
)
def test_a_sudden_50ms_queue_costs_misses_not_a_failover(params: ProbeParams) -> None:
    """From 0.52 s every reply of e-gw1 waits 50 ms in a queue (a saturated link: tbf's bound in the lab). Its
    first probes miss, and the fast ones are sent while the first one's reply is still queued. That late reply
    arrives before the third miss and teaches the deadline the queue (SRTT + 4 x deviation), so the next probe
    succeeds: e-gw1 never goes down, and on_change never fires. A late reply counts as an RTT sample even when a
    newer probe was sent meanwhile, and extends that probe's deadline, also past the next interval when the interval
    is shorter than the queue (30 and 25 ms here): the next probe waits for that one's outcome."""
    net = FakeNet()
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes, params)
    advance(mon, net, 0.52)
    net.delay[GW1] = 0.05
    with structlog.testing.capture_logs() as logs:
        advance(mon, net, 2.0)
    assert [e["peer"] for e in logs if e["event"] == "health.first_miss"] == ["e-gw1", "e-gw1"]
    assert [e for e in logs if e["event"] == "health.state_changed"] == []
    assert len(changes) == 1


def test_the_first_miss_of_an_up_peer_is_logged_once_where_a_failover_starts() -> None:
    """e-gw1 goes silent at 0.52 s after answering (up): its first miss (0.61 s, the probe sent at 0.59 and its
    20 ms timeout) is logged once per echo id, not the second and third misses, nor anything of e-gw2."""
    net = FakeNet()
    mon = monitor("e-w1", net, [])
    advance(mon, net, 0.52)
    net.silent |= {(GW1, ALIVE_ID), (GW1, WEST_ID)}
    with structlog.testing.capture_logs() as logs:
        advance(mon, net, 2.0)
    misses = [e for e in logs if e["event"] == "health.first_miss"]
    assert sorted((e["peer"], e["echo_id"]) for e in misses) == [("e-gw1", ALIVE_ID), ("e-gw1", WEST_ID)]
    downs = [e for e in logs if e["event"] == "health.state_changed" and e["new"] == "down"]
    assert {e["echo_id"] for e in downs} == {ALIVE_ID, WEST_ID}


@pytest.mark.parametrize(
    ("params", "down_at"),
    [
        # fast_interval = interval: probes at 0.59, 0.68, 0.77 miss; down at 0.79 (20 ms timeout).
        (classic(fast_interval=0.1, startup_grace=0), 0.79),
        # An 80 ms timeout: a probe in flight is never replaced by a fast one. The probe at 0.59 misses at 0.67;
        # the next goes out then (not at 0.617) and misses at 0.75, the third at 0.83: each had its timeout.
        (classic(timeout=0.08, startup_grace=0), 0.83),
    ],
    ids=["no-acceleration", "slow-peer-waited-for"],
)
def test_each_miss_waits_for_its_probe_and_interval(params: ProbeParams, down_at: float) -> None:
    """e-gw1 dies at 0.52 s; with these parameters it is down at ``down_at``, once."""
    net = FakeNet()
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes, params)
    advance(mon, net, 0.52)
    net.silent |= {(GW1, ALIVE_ID), (GW1, WEST_ID)}
    advance(mon, net, 2.0)
    assert [round(at, 3) for at, _ in changes[1:]] == [down_at]


def test_a_single_miss_is_followed_by_one_fast_probe_then_the_normal_interval() -> None:
    """One lost reply (the probe at 0.59): the next probe goes out 27 ms later (0.617), is answered, and the
    peer stays up and goes back to its 90 ms interval (0.707, ...); no Health change."""
    net = FakeNet()
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes)
    advance(mon, net, 0.58)
    net.silent |= {(GW1, ALIVE_ID)}
    advance(mon, net, 0.60)
    net.silent.clear()
    sent_before = len(net.sockets[ALIVE_ID].sent)
    advance(mon, net, 0.8)
    assert len(changes) == 1
    assert mon.states()[(GW1, ALIVE_ID)].state.value == "up"
    later = [a for a, _ in net.sockets[ALIVE_ID].sent[sent_before:]]
    assert later.count(GW1) == 3  # 0.617 (fast), 0.707, 0.797


def test_recovery_needs_three_replies() -> None:
    """e-gw1 is silent from the start. Never seen answering, it is confirmed at the normal interval: down at
    0.25 (probes at 0.05, 0.14, 0.23; a starting cluster's gateways get the time to fill their liveness set). It
    answers the probe at 1.04; the next two go out at the fast interval (1.067, 1.094); the third consecutive
    reply, at 1.095, brings it back (hysteresis)."""
    net = FakeNet(silent={(GW1, ALIVE_ID)})
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes)
    advance(mon, net, 1.0)
    assert mon.health.down == {"e-gw1"}
    net.silent.clear()
    advance(mon, net, 1.09)
    assert mon.health.down == {"e-gw1"}  # replies to the probes at 1.04 and 1.067 only
    advance(mon, net, 1.2)
    assert mon.health.down == frozenset()
    assert [round(at, 3) for at, _ in changes] == [0.0, 0.25, 1.095]


def test_a_returning_gateway_enters_with_its_reach_at_once() -> None:
    """The admission barrier: e-gw1 comes back, its alive id answering a probe before west's reach id does.
    It is held down until its reach of west is up too (never "up, reaching nothing", which on a worker would
    split the clusters into groups of their own and back), then enters with west in one change."""
    net = FakeNet(silent={(GW1, ALIVE_ID), (GW1, WEST_ID)})
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes)
    advance(mon, net, 1.0)
    assert mon.health.down == {"e-gw1"}
    net.silent = {(GW1, WEST_ID)}
    advance(mon, net, 1.05)  # the alive id answered the probe at 1.04, west's missed
    net.silent = set()
    advance(mon, net, 1.5)
    assert mon.states()[(GW1, ALIVE_ID)].state.value == "up"
    back = [h for at, h in changes if at > 1.0]
    assert back == [Health(reach={"e-gw1": {"west"}, "e-gw2": {"west"}})]


def test_a_returning_gateway_is_held_only_while_its_reach_settles() -> None:
    """West's reach id answers once and then no more: the barrier lifts at that miss, and e-gw1 is back for the
    clusters it does reach (here none), not held out of every group."""
    net = FakeNet(silent={(GW1, ALIVE_ID), (GW1, WEST_ID)})
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes)
    advance(mon, net, 1.0)
    net.silent = {(GW1, WEST_ID)}
    advance(mon, net, 1.08)  # alive answered at 1.04 and 1.067; west missed both
    net.silent = set()
    advance(mon, net, 1.1)  # the third alive reply brings e-gw1 up; west's first reply: it is settling
    assert mon.health.down == {"e-gw1"}
    net.silent = {(GW1, WEST_ID)}
    advance(mon, net, 1.6)
    assert mon.health == Health(reach={"e-gw1": set(), "e-gw2": {"west"}})


def test_unseen_peer_is_not_taken_down_during_the_startup_grace() -> None:
    """With a 1 s grace, e-gw1 (silent from the start, never seen) stays usable for 1 s although its misses
    count; the first miss after the grace takes it down (probe at 1.04, timeout 20 ms). e-gw2, seen answering,
    could fail as usual."""
    net = FakeNet(silent={(GW1, ALIVE_ID), (GW1, WEST_ID)})
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes, classic(startup_grace=1.0))
    advance(mon, net, 1.0)
    assert mon.health.down == frozenset()
    assert mon.states()[(GW1, ALIVE_ID)].misses == 11
    advance(mon, net, 1.2)
    assert mon.health.down == {"e-gw1"}
    assert [round(at, 3) for at, h in changes if h.down] == [1.06]


def test_gateway_that_lost_a_cluster_is_avoided_for_it_only() -> None:
    """e-gw2 answers id 1 but not west's id: it stays up and leaves reach for west."""
    net = FakeNet(silent={(GW2, WEST_ID)})
    mon = monitor("e-w1", net, [])
    advance(mon, net, 1.0)
    assert mon.health == Health(down=(), reach={"e-gw1": {"west"}, "e-gw2": set()})
    assert mon.planning_snapshot(seed_east()).health.usable("e-gw2", "west") is False
    assert mon.planning_snapshot(seed_east()).health.usable("e-gw2") is True


def test_gateway_answers_reach_while_a_remote_gateway_answers() -> None:
    """e-gw1 answers id 1 and west's id; when both west gateways go silent it keeps only id 1."""
    net = FakeNet()
    mon = monitor("e-gw1", net, [])
    advance(mon, net, 0.5)
    assert (mon.plan.mode, mon.liveness_ids) == ("gateway", frozenset({ALIVE_ID, WEST_ID}))
    net.silent |= {(W_GW1, ALIVE_ID)}
    advance(mon, net, 1.0)
    assert (mon.health.down, mon.liveness_ids) == (frozenset({"w-gw1"}), frozenset({ALIVE_ID, WEST_ID}))
    net.silent |= {(W_GW2, ALIVE_ID)}
    advance(mon, net, 1.5)
    assert (mon.health.down, mon.liveness_ids) == (frozenset({"w-gw1", "w-gw2"}), frozenset({ALIVE_ID}))


def test_single_gateway_standby_takes_over_probing_when_the_active_one_dies() -> None:
    """Single-gateway mode: standby e-gw2 probes e-gw1; when e-gw1 dies it becomes the gateway, closes its
    reach socket and probes west's gateways on the tunnel."""
    net = FakeNet()
    mon = monitor("e-gw2", net, [], multi_active=False)
    advance(mon, net, 0.5)
    assert (mon.plan.mode, [t.hostname for t in mon.plan.targets]) == ("worker", ["e-gw1"])
    net.silent |= {(GW1, ALIVE_ID), (GW1, WEST_ID)}
    advance(mon, net, 1.5)
    assert (mon.plan.mode, [t.hostname for t in mon.plan.targets]) == ("gateway", ["e-gw1", "w-gw1", "w-gw2"])
    assert (net.sockets[WEST_ID].closed, net.sockets[ALIVE_ID].closed) == (True, False)
    assert mon.health == Health(down={"e-gw1"})
    net.silent.clear()
    advance(mon, net, 2.0)
    assert (mon.plan.mode, [t.hostname for t in mon.plan.targets], mon.health) == (
        "worker",
        ["e-gw1"],
        Health(reach={"e-gw1": {"west"}}),
    )


def test_removed_endpoint_is_no_longer_probed_nor_reported() -> None:
    """When the broker drops a dead gateway's endpoint, it leaves the targets and the down set."""
    net = FakeNet(silent={(GW1, ALIVE_ID)})
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes)
    advance(mon, net, 1.0)
    assert mon.health.down == {"e-gw1"}
    snap = seed_east()
    mon.update(attrs.evolve(snap, endpoints=[e for e in snap.endpoints if e.hostname != "e-gw1"]))
    assert [t.hostname for t in mon.plan.targets] == ["e-gw2"]
    assert changes[-1][1] == Health(reach={"e-gw2": {"west"}})


def test_gateway_published_after_start_is_used_only_once_it_answers() -> None:
    """e-gw2's endpoint appears 1 s after start: it is down (pending) for the planner until its first reply,
    so no flow is sent to a gateway that is still coming up; then it is up."""
    net = FakeNet(silent={(GW2, ALIVE_ID), (GW2, WEST_ID)})
    changes: list[tuple[float, Health]] = []
    mon = monitor("e-w1", net, changes)
    snap = seed_east()
    mon.update(attrs.evolve(snap, endpoints=[e for e in snap.endpoints if e.hostname != "e-gw2"]))
    advance(mon, net, 1.0)
    mon.update(snap)
    assert mon.health.down == {"e-gw2"}
    advance(mon, net, 1.5)
    assert mon.health.down == {"e-gw2"}
    net.silent.clear()
    advance(mon, net, 1.7)
    assert mon.health == Health(reach={"e-gw1": {"west"}, "e-gw2": {"west"}})


def test_liveness_waits_for_a_sync_of_the_current_role() -> None:
    """With require_sync (the route agent): no id is answered until a sync of a plan made with the node's own
    Endpoint published succeeded; a failed sync does not count. Becoming a standby (or taking over) changes
    nothing: a node taking over keeps answering while it builds its tunnel. Re-publication needs a new sync."""
    net = FakeNet()
    mon = HealthMonitor("e-gw1", probe=classic(), liveness=LivenessParams(), rng=lambda: 0.5,
                        clock=lambda: net.clock, sockets=net.socket, require_sync=True)  # type: ignore[arg-type]  # fmt: skip
    snap = seed_east()
    mon.update(snap)
    assert mon.liveness_ids == frozenset()
    mon.planning_snapshot(snap)
    mon.synced(False)
    assert mon.liveness_ids == frozenset()
    mon.synced(True)
    assert mon.liveness_ids == {ALIVE_ID, WEST_ID}
    standby = attrs.evolve(snap, config=attrs.evolve(snap.config, multi_active=False), endpoints=[
        *snap.endpoints, attrs.evolve(snap.endpoints[0], hostname="e-gw0")])  # fmt: skip
    mon.update(standby)  # e-gw0 sorts first: e-gw1 becomes a standby
    assert mon.liveness_ids == {ALIVE_ID, WEST_ID}
    mon.update(attrs.evolve(snap, endpoints=snap.endpoints[1:]))  # our endpoint expired
    assert mon.liveness_ids == frozenset()
    mon.planning_snapshot(attrs.evolve(snap, endpoints=snap.endpoints[1:]))
    mon.synced(True)
    mon.update(snap)  # published again: answers only after the next sync
    assert mon.liveness_ids == frozenset()
    mon.planning_snapshot(snap)
    mon.synced(True)
    assert mon.liveness_ids == {ALIVE_ID, WEST_ID}


def test_status_says_since_when_and_what_detecting_the_failure_cost() -> None:
    """e-gw1's last answered probe left at 0.50 s (answered 1 ms later); it is called down at 0.664 s (the test
    above). The status file's peer says ``since`` that moment (wall clock), its transitions list has the
    change with ``detection_seconds`` 0.163 (0.664 - 0.501), and a listener heard the same change once."""
    net = FakeNet()
    mon = monitor("e-w1", net, [])
    mon.events.wall = lambda: 1_800_000_000.0 + net.clock
    heard: list[str] = []
    mon.events.listeners.append(lambda event: heard.append(f"{event.peer}:{event.what}:{event.old}->{event.new}"))
    advance(mon, net, 0.52)
    net.silent |= {(GW1, ALIVE_ID), (GW1, WEST_ID)}
    advance(mon, net, 1.0)
    doc = mon.status_json()
    gw1 = next(p for p in doc["peers"] if p["hostname"] == "e-gw1")
    assert gw1["state"] == "down"
    assert gw1["since"] == "2027-01-15T08:00:00.664+00:00"
    alive = [t for t in doc["transitions"] if t["peer"] == "e-gw1" and t["what"] == "alive" and t["new"] == "down"]
    assert len(alive) == 1
    assert alive[0]["detection_seconds"] == pytest.approx(0.163, abs=0.0015)
    assert "e-gw1:alive:up->down" in heard
    assert heard.count("e-gw1:alive:up->down") == 1
