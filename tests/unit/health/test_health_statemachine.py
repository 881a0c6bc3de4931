"""The pure core of failure detection: parameters, the up/down state machine, jitter, probes in flight, echo ids."""

from __future__ import annotations

import zlib
from ipaddress import IPv4Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magw.health.book import SEQ_MOD, Outcome, ProbeBook, jittered
from magw.health.echoids import ALIVE_ID, REACH_BASE, cluster_of, reach_ids
from magw.health.params import LivenessParams, ProbeParams
from magw.health.statemachine import NEW_LATER, FailPolicy, PeerState, ProbeState

P = ProbeParams()  # 100 ms, 20 ms timeout, down after 3, up after 3


def run(
    outcomes: str, *, params: ProbeParams = P, policy: FailPolicy = "always", start: ProbeState | None = None
) -> list[str]:
    """Feed 's' (success) / 'm' (miss) outcomes; the state after each one."""
    state = start or ProbeState()
    seen = []
    for c in outcomes:
        state = state.observe(c == "s", params, policy=policy)
        seen.append(state.state.value)
    return seen


def test_defaults_are_the_documented_ones() -> None:
    """At most 100 ms between probes, as little as 30 ms within a budget of 1,000 probes/s (20 ms in transition),
    20 ms reply timeout, down after 3 misses, up after 3 successes, 20% jitter; 1 s liveness timeout. A shorter
    interval than 30 ms (20 ms) also shortens the min interval (the fast interval) to it."""
    assert (P.interval, P.min_interval, P.budget, P.fast_interval) == (0.1, 0.03, 1000.0, 0.02)
    assert (P.timeout, P.down_after, P.up_after, P.jitter) == (0.02, 3, 3, 0.2)
    assert P.startup_grace == 3.0
    assert ProbeParams(interval=0.02, timeout=0.01).min_interval == 0.02
    assert ProbeParams(interval=0.015, timeout=0.01).fast_interval == 0.015
    assert ProbeParams(interval=1.0, fast_interval=0.5).fast_interval == 0.5
    assert (LivenessParams().timeout, LivenessParams().refresh) == (1.0, 0.25)


def test_first_success_makes_an_unknown_peer_up() -> None:
    """An unknown peer is usable already; one reply is enough to call it up."""
    assert run("s") == ["up"]


def test_down_after_exactly_down_after_consecutive_misses() -> None:
    """Two misses keep an up peer up; the third takes it down."""
    assert run("smmm") == ["up", "up", "up", "down"]


def test_a_success_resets_the_miss_run() -> None:
    """Misses must be consecutive: m m s m m never reaches three."""
    assert run("smmsmm") == ["up"] * 6


def test_up_after_exactly_up_after_consecutive_successes() -> None:
    """From down, two replies are not enough; the third brings the peer back."""
    assert run("smmmsss") == ["up", "up", "up", "down", "down", "down", "up"]


def test_hysteresis_a_flapping_peer_stays_down() -> None:
    """Alternating replies and misses never make up_after consecutive successes: the peer stays down."""
    assert run("smmm" + "sm" * 10)[3:] == ["down"] * 21


def test_unknown_peer_fails_after_down_after_misses() -> None:
    """A peer that never answered is declared down after down_after misses (a gateway dead at start)."""
    assert run("mmm") == ["unknown", "unknown", "down"]


def test_after_seen_policy_fails_only_a_peer_that_answered() -> None:
    """A remote gateway that just took over (single-gateway mode) stays unknown, not down, until it answers;
    after that its misses count."""
    assert run("m" * 10, policy="after_seen") == ["unknown"] * 10
    assert run("m" * 10 + "smmm", policy="after_seen")[-4:] == ["up", "up", "up", "down"]


def test_never_policy_keeps_a_standby_as_it_was() -> None:
    """A standby's misses change nothing (it is not expected to answer); its replies still bring it up."""
    assert run("smmmmm", policy="never") == ["up"] * 6
    standby = ProbeState(state=PeerState.UP)
    for _ in range(5):
        standby = standby.observe(False, P, policy="never")
    assert (standby.misses, standby.observe(False, P).state) == (0, PeerState.UP)  # active now: counts from 0
    down = ProbeState(state=PeerState.DOWN, misses=3)
    assert run("mmsss", policy="never", start=down) == ["down", "down", "down", "down", "up"]


def test_a_late_peer_is_unusable_until_its_first_reply() -> None:
    """A gateway that appears after start is pending (down for the planner) until it answers once."""
    assert (NEW_LATER.down, ProbeState().down) == (True, False)
    assert run("mms", start=NEW_LATER) == ["pending", "pending", "up"]
    assert run("mmm", start=NEW_LATER) == ["pending", "pending", "down"]


@given(down_after=st.integers(1, 10), up_after=st.integers(1, 10), misses=st.integers(0, 30))
def test_counts_are_configurable(down_after: int, up_after: int, misses: int) -> None:
    """For any counts: an up peer is down exactly from the down_after-th miss, back up at the up_after-th success."""
    params = ProbeParams(down_after=down_after, up_after=up_after)
    states = run("s" + "m" * misses + "s" * up_after, params=params)
    expect_miss = ["down" if i + 1 >= down_after else "up" for i in range(misses)]
    assert states[1 : 1 + misses] == expect_miss
    if misses >= down_after:
        assert states[1 + misses :] == ["down"] * (up_after - 1) + ["up"]
    else:
        assert states[1 + misses :] == ["up"] * up_after


def test_in_transition_while_a_run_can_still_change_usability() -> None:
    """Misses of an up peer that may fail, or successes of a down peer, are a transition (probed at the fast
    interval); a peer that is settled, never seen answering, or whose misses cannot take it down, is not."""

    def after(outcomes: str, policy: FailPolicy = "always", start: ProbeState | None = None) -> bool:
        state = start or ProbeState()
        for c in outcomes:
            state = state.observe(c == "s", P, policy=policy)
        return state.in_transition(policy)

    assert [after(x) for x in ("", "s", "sm", "smm", "smmm", "smmms", "smmmss", "smmmsss")] == [
        False, False, True, True, False, True, True, False]  # fmt: skip
    assert (after("m"), after("mm"), after("mmm")) == (False, False, False)  # never seen: the normal interval
    assert after("m", policy="after_seen") is False  # an unseen takeover cannot fail yet
    assert after("sm", policy="after_seen") is True
    assert after("smm", policy="never") is False
    assert after("m", start=NEW_LATER) is False  # pending: unusable already, nothing to confirm
    assert after("s", start=NEW_LATER) is False  # one reply made it up


def test_liveness_counts_one_run_at_a_time() -> None:
    """The state keeps the current run only: misses and successes are never both non-zero."""
    state = ProbeState()
    for c in "ssmmsmmmss":
        state = state.observe(c == "s", P)
        assert 0 in (state.misses, state.successes)
    assert (state.state, state.misses, state.successes) == (PeerState.DOWN, 0, 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"interval": 0}, "probe interval: must be > 0 seconds, got 0"),
        ({"timeout": 0.085}, "probe timeout: must be <= the shortest jittered interval 0.08, got 0.085"),
        ({"fast_interval": 0.2}, "probe fast interval: must be <= the probe interval 0.1, got 0.2"),
        ({"fast_interval": 0}, "probe fast interval: must be > 0 seconds, got 0"),
        ({"startup_grace": -1}, "probe startup grace: must be from 0 to 3600 seconds, got -1"),
        ({"down_after": 0}, "down after: must be from 1 to 100, got 0"),
        ({"up_after": 101}, "up after: must be from 1 to 100, got 101"),
        ({"jitter": 1.0}, "probe jitter: must be from 0 to below 1 (a fraction of the interval), got 1.0"),
    ],
)
def test_bad_probe_params_fail_with_one_line(kwargs: dict[str, float], message: str) -> None:
    """Each bad parameter is rejected with one line naming it and the reason."""
    with pytest.raises(ValueError) as info:
        ProbeParams(**kwargs)  # type: ignore[arg-type]  # hypothesis-free table of mixed int/float values
    assert str(info.value) == message


def test_bad_liveness_params_fail_with_one_line() -> None:
    """The liveness set must be renewed at least twice per lifetime, so one lost refresh never expires it."""
    with pytest.raises(ValueError) as info:
        LivenessParams(timeout=1.0, refresh=0.6)
    assert str(info.value) == "lease refresh: must be at most half the lease timeout 1.0, got 0.6"


@given(u=st.floats(0.0, 1.0), jitter=st.floats(0.0, 0.99), interval=st.floats(0.001, 10.0))
def test_jitter_stays_within_its_bounds(u: float, jitter: float, interval: float) -> None:
    """Every jittered interval lies in [interval * (1 - jitter), interval]: never later than configured."""
    value = jittered(interval, jitter, u)
    assert interval * (1 - jitter) - 1e-9 <= value <= interval + 1e-9


def test_jitter_extremes_and_middle() -> None:
    """u = 0, 0.5 and 1 give the interval itself, 10% less and 20% less."""
    assert [round(jittered(0.1, 0.2, u), 9) for u in (0.0, 0.5, 1.0)] == [0.1, 0.09, 0.08]


A = (IPv4Address("240.0.0.11"), ALIVE_ID)
B = (IPv4Address("240.0.0.12"), ALIVE_ID)


def test_reply_within_timeout_is_a_success() -> None:
    """A reply with the expected sequence number inside the timeout is a success with its RTT."""
    book = ProbeBook(timeout=0.03)
    seq = book.sent(A, 10.0)
    assert book.received(A, seq, 10.002) == Outcome(key=A, success=True, rtt=pytest.approx(0.002))
    assert book.expire(11.0) == []


def test_no_reply_is_a_miss_only_after_the_timeout() -> None:
    """Expiring before the deadline reports nothing; after it, one miss per probe in flight, sorted by key."""
    book = ProbeBook(timeout=0.03)
    book.sent(B, 10.0)
    book.sent(A, 10.01)
    assert book.next_deadline() == pytest.approx(10.03)
    assert book.expire(10.029) == []
    assert book.expire(10.035) == [Outcome(key=B, success=False)]
    assert book.expire(10.05) == [Outcome(key=A, success=False)]
    assert book.in_flight == 0


def test_late_duplicate_and_stale_replies_prove_nothing() -> None:
    """A reply after the timeout, a second copy, or one to an older probe is ignored."""
    book = ProbeBook(timeout=0.03)
    first = book.sent(A, 1.0)
    assert book.received(A, first, 1.031) is None  # late
    assert book.expire(1.04) == [Outcome(key=A, success=False)]
    second = book.sent(A, 1.1)
    assert book.received(A, first, 1.101) is None  # stale
    assert book.received(A, second, 1.102) == Outcome(key=A, success=True, rtt=pytest.approx(0.002))
    assert book.received(A, second, 1.103) is None  # duplicate


def test_a_late_reply_of_an_older_probe_teaches_the_rtt_and_extends_the_probe_in_flight() -> None:
    """A fast probe went out before the first one's reply, delayed by a queue, came back: that reply proves no
    success, but is an RTT sample, and the probe in flight now waits SRTT + 4 x deviation from its own send. A
    second copy is no second sample; a probe of a key that got no reply keeps its deadline."""
    book = ProbeBook(timeout=0.02, cap=0.08)
    for i in range(20):
        book.received(A, book.sent(A, i * 0.1), i * 0.1 + 0.001)
    first = book.sent(A, 2.0)
    assert book.expire(2.021) == [Outcome(key=A, success=False)]
    second = book.sent(A, 2.021)
    book.sent(B, 2.021)
    assert book.received(A, first, 2.051) is None
    assert book.received(A, first, 2.052) is None  # a copy: no second sample
    assert book.srtt(A) == pytest.approx(0.001 + (0.051 - 0.001) / 8, abs=1e-6)
    assert book.expire(2.0411) == [Outcome(key=B, success=False)]  # B's 20 ms deadline did not move
    # A's second probe, due at 2.041 when sent, now waits about 59 ms: its reply at 2.072 is a success
    assert book.next_deadline() == pytest.approx(2.021 + 0.00725 + 4 * 0.0125, abs=1e-4)
    assert book.received(A, second, 2.021 + 0.051) == Outcome(key=A, success=True, rtt=pytest.approx(0.051))


def test_sequence_numbers_wrap_at_16_bits() -> None:
    """Sequence numbers count up per key and wrap around within the 16-bit field."""
    book = ProbeBook(timeout=0.03)
    seqs = [book.sent(A, float(i)) for i in range(SEQ_MOD + 1)]
    assert (seqs[0], seqs[SEQ_MOD - 2], seqs[SEQ_MOD - 1], seqs[SEQ_MOD]) == (1, SEQ_MOD - 1, 0, 1)


def test_deadline_adapts_to_a_far_peer() -> None:
    """A peer 50 ms away: its first probe misses (20 ms floor), its late reply teaches the RTT, and the next
    probe waits 4 x RTT, capped at 90 ms: it succeeds. A near peer keeps the 20 ms floor."""
    book = ProbeBook(timeout=0.02, cap=0.09)
    first = book.sent(A, 0.0)
    assert book.expire(0.021) == [Outcome(key=A, success=False)]
    assert book.received(A, first, 0.05) is None
    assert book.srtt(A) == pytest.approx(0.05)
    second = book.sent(A, 0.1)
    assert book.next_deadline() == pytest.approx(0.19)
    assert book.received(A, second, 0.15) == Outcome(key=A, success=True, rtt=pytest.approx(0.05))
    near = book.sent(B, 1.0)
    book.received(B, near, 1.001)
    book.sent(B, 1.1)
    assert book.wait_for(B) == pytest.approx(0.02)


def test_a_queue_filling_up_costs_one_miss_not_three() -> None:
    """An idle peer answers in 0.4 ms; then its link saturates and every reply waits 50 ms in a queue (tbf's
    bound in the lab). The first probe misses; its late reply raises the deadline past the queue at once
    (SRTT + 4 x deviation), so the next probes succeed and three misses in a row, a peer down, never happen."""
    book = ProbeBook(timeout=0.02, cap=0.09)
    now = 0.0
    for _ in range(50):
        seq = book.sent(A, now)
        assert book.received(A, seq, now + 0.0004) is not None
        now += 0.1
    outcomes = []
    for _ in range(10):
        seq = book.sent(A, now)
        outcomes += book.expire(now + 0.049)
        reply = book.received(A, seq, now + 0.05)
        outcomes += [reply] if reply is not None else book.expire(now + 0.095)
        now += 0.1
    assert [o.success for o in outcomes] == [False] + [True] * 9


def test_forget_drops_keys_no_longer_probed() -> None:
    """A peer removed from the targets has no probe in flight any more (no miss reported for it)."""
    book = ProbeBook(timeout=0.03)
    book.sent(A, 1.0)
    book.sent(B, 1.0)
    book.forget(frozenset({A}))
    assert book.expire(2.0) == [Outcome(key=A, success=False)]


def test_reach_ids_have_the_high_bit_and_are_distinct() -> None:
    """Reach ids live in 0x8000-0xFFFF (never ALIVE_ID) and differ per cluster, also for many clusters."""
    clusters = [f"c{i}" for i in range(300)]
    ids = reach_ids(clusters)
    assert sorted(ids) == sorted(clusters)
    assert all(REACH_BASE <= v <= 0xFFFF for v in ids.values())
    assert len(set(ids.values())) == 300
    assert ALIVE_ID not in ids.values()


def test_reach_ids_depend_only_on_the_set_of_clusters() -> None:
    """Prober and answerer agree whatever order they list the clusters in; decoding gives the cluster back."""
    ids = reach_ids(["west", "north", "west"])
    assert ids == reach_ids(["north", "west"])
    assert ids["west"] == REACH_BASE | (0x7FFF & zlib.crc32(b"west"))
    assert [cluster_of(ids["west"], ids), cluster_of(ALIVE_ID, ids)] == ["west", None]
