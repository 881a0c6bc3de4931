"""The probes in flight: which (peer, echo id) waits for which sequence number, and when it misses. Pure.

Times are seconds on one monotonic scale, given by the caller (a fake clock in
tests). A probe succeeds when its reply, matched by sequence number, arrives
by its deadline; it misses when ``expire`` runs after the deadline without a
reply. A duplicate or a reply to an older probe counts for nothing.

The deadline adapts to each peer's round-trip time as TCP's retransmission timer does
(Jacobson/Karels, RFC 6298): ``sent + max(timeout, SRTT + RTT_FACTOR x RTTVAR)``, at
most ``sent + cap`` (``ProbeParams.max_wait``: 250 ms, or a longer interval). In a
cluster the RTT is far below the floor ``timeout``; across a WAN a peer 50 ms away gets 150 ms instead of being declared
dead. Every reply to one of the last ``RECENT`` probes of a peer, late or not, updates the
smoothed RTT (gain 1/8) and its mean deviation (gain 1/4). The deviation is what matters
under congestion: when a saturated link's queue (tbf's 50 ms in the lab) suddenly
delays the replies of a peer whose idle RTT is below a millisecond, one late reply
raises the deadline past the queue at once, where 4 x SRTT would take three probes
to get there, and three misses in a row declare the peer down
(``benchmarks/throughput.py`` saw routes withdrawn every few hundred ms that way). A late reply
counts even when newer probes were sent meanwhile: a peer in transition is probed every fast
interval (30 ms), so when a queue suddenly holds replies for 50 ms, the first probe's reply comes
after the second probe went out. Counting only the latest probe's reply, no sample came in time,
and the third miss took the peer down (``test_a_sudden_50ms_queue_costs_misses_not_a_failover``). Such a
sample also extends the deadline of the probe in flight to its send time plus the new wait: the
fast probe went out before the queue was known.
There is at most one probe in flight per key: a probe due while one is in flight
waits until that one's outcome is known (``waiting``), so a deadline may pass the
next interval: probing slows to the peer's pace instead of cutting its wait short.
"""

from __future__ import annotations

from ipaddress import IPv4Address

import attrs

StateKey = tuple[IPv4Address, int]  # (peer VTEP, echo id)

SEQ_MOD = 1 << 16
RTT_FACTOR = 4.0  # K of RFC 6298
RTT_GAIN = 0.125  # alpha: the smoothed RTT's gain
RTTVAR_GAIN = 0.25  # beta: the mean deviation's gain
RECENT = 4  # probes per key whose replies still give an RTT sample (one each)


@attrs.frozen(kw_only=True)
class Outcome:
    key: StateKey
    success: bool
    rtt: float | None = None


def jittered(interval: float, jitter: float, u: float) -> float:
    """``interval`` reduced by a random fraction of at most ``jitter`` (``u`` uniform in [0, 1]).

    One-sided, as BFD does (RFC 5880, 6.8.7): probes never come later than the
    configured interval, so jitter never slows detection down.
    """
    return interval * (1.0 - jitter * u)


@attrs.define
class RttStats:
    """Round-trip times of one key's replies since it was first answered (Welford's running mean and variance):
    what the Gateway status shows per connection (``latencyRTT``: last, min, average, max, stdDev)."""

    last: float = 0.0
    low: float = float("inf")
    high: float = 0.0
    count: int = 0
    mean: float = 0.0
    _m2: float = 0.0

    def add(self, rtt: float) -> None:
        self.last, self.low, self.high = rtt, min(self.low, rtt), max(self.high, rtt)
        self.count += 1
        delta = rtt - self.mean
        self.mean += delta / self.count
        self._m2 += delta * (rtt - self.mean)

    @property
    def stddev(self) -> float:
        return (self._m2 / self.count) ** 0.5 if self.count else 0.0

    def as_json(self) -> dict[str, float]:
        """Seconds: ``last``, ``min``, ``average``, ``max``, ``stdDev`` (the Gateway CRD's names)."""
        return {"last": self.last, "min": self.low, "average": self.mean, "max": self.high, "stdDev": self.stddev}


@attrs.frozen
class _Probe:
    seq: int
    sent: float
    deadline: float


@attrs.define
class ProbeBook:
    """``timeout``: the least time a reply is waited for; ``cap``: the most (None: no adaptation beyond ``timeout``)."""

    timeout: float
    cap: float | None = None
    _pending: dict[StateKey, _Probe] = attrs.field(factory=dict)
    _recent: dict[StateKey, dict[int, _Probe]] = attrs.field(factory=dict)  # seq -> probe, oldest first
    _seq: dict[StateKey, int] = attrs.field(factory=dict)
    _srtt: dict[StateKey, float] = attrs.field(factory=dict)
    _rttvar: dict[StateKey, float] = attrs.field(factory=dict)
    _stats: dict[StateKey, RttStats] = attrs.field(factory=dict)

    def wait_for(self, key: StateKey) -> float:
        """How long a reply of ``key`` is waited for now."""
        srtt = self._srtt.get(key)
        if srtt is None or self.cap is None:
            return self.timeout
        return min(self.cap, max(self.timeout, srtt + RTT_FACTOR * self._rttvar[key]))

    def srtt(self, key: StateKey) -> float | None:
        return self._srtt.get(key)

    def rtt_stats(self, key: StateKey) -> RttStats | None:
        return self._stats.get(key)

    def sent(self, key: StateKey, now: float) -> int:
        """Record a probe of ``key`` sent at ``now``; returns the sequence number to put in it."""
        seq = (self._seq.get(key, 0) + 1) % SEQ_MOD
        self._seq[key] = seq
        probe = _Probe(seq=seq, sent=now, deadline=now + self.wait_for(key))
        self._pending[key] = probe
        recent = self._recent.setdefault(key, {})
        recent.pop(seq, None)  # a sequence number that wrapped around replaces its old probe
        recent[seq] = probe
        if len(recent) > RECENT:
            del recent[next(iter(recent))]
        return seq

    def received(self, key: StateKey, seq: int, at: float) -> Outcome | None:
        """A reply arrived at ``at``: the success it proves, or None if it proves nothing."""
        probe = self._recent.get(key, {}).pop(seq, None)  # one RTT sample per probe: a duplicate is ignored
        if probe is None:
            return None
        rtt = max(at - probe.sent, 0.0)
        old = self._srtt.get(key)
        if old is None:  # RFC 6298 2.2: the first sample
            self._srtt[key], self._rttvar[key] = rtt, rtt / 2
        else:  # 2.3: the deviation first, from the old SRTT
            self._rttvar[key] += RTTVAR_GAIN * (abs(old - rtt) - self._rttvar[key])
            self._srtt[key] = old + RTT_GAIN * (rtt - old)
        self._stats.setdefault(key, RttStats()).add(rtt)
        pending = self._pending.get(key)
        if pending is not None and pending.seq != seq:
            # A late reply of an older probe taught a longer round trip: the probe in flight waits as long. Only
            # ever later, and only on a reply: a dead peer's deadlines stay where they were.
            deadline = pending.sent + self.wait_for(key)
            if deadline > pending.deadline:
                self._pending[key] = attrs.evolve(pending, deadline=deadline)
            return None
        if pending is None or at > pending.deadline:
            return None
        del self._pending[key]
        return Outcome(key=key, success=True, rtt=rtt)

    def expire(self, now: float) -> list[Outcome]:
        """Misses: the probes in flight whose deadline passed at ``now`` (sorted by key)."""
        late = sorted(k for k, p in self._pending.items() if now > p.deadline)
        for key in late:
            del self._pending[key]
        return [Outcome(key=k, success=False) for k in late]

    def waiting(self, key: StateKey) -> bool:
        """True while a probe of ``key`` is in flight (its outcome is not known yet)."""
        return key in self._pending

    def next_deadline(self) -> float | None:
        """When the first probe in flight turns into a miss."""
        if not self._pending:
            return None
        return min(p.deadline for p in self._pending.values())

    def forget(self, keep: frozenset[StateKey]) -> None:
        """Drop every key not in ``keep`` (peers no longer probed)."""
        for table in (self._pending, self._recent, self._seq, self._srtt, self._rttvar, self._stats):
            for key in [k for k in table if k not in keep]:
                del table[key]

    @property
    def in_flight(self) -> int:
        return len(self._pending)
