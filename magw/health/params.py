"""The tunables of probing and of the liveness set, validated (one line per bad field)."""

from __future__ import annotations

import attrs

DEFAULT_INTERVAL = 0.1
DEFAULT_MIN_INTERVAL = 0.03
DEFAULT_BUDGET = 1000.0  # probes per second a node may spend to probe faster than DEFAULT_INTERVAL
DEFAULT_GATEWAY_BUDGET = 20_000.0  # echoes per second the nodes of a cluster may make one gateway answer, together
DEFAULT_FAST_INTERVAL = 0.02
DEFAULT_STARTUP_GRACE = 3.0
DEFAULT_TIMEOUT = 0.02
DEFAULT_DOWN_AFTER = 3
DEFAULT_UP_AFTER = 3
DEFAULT_JITTER = 0.2
DEFAULT_LIVENESS_TIMEOUT = 1.0
DEFAULT_LIVENESS_REFRESH = 0.25
# On a clean exit (SIGTERM) the liveness set is renewed once for this long instead of emptied: a restarted agent
# takes it over before it ends, so a restart moves no flow (docs/health.md). The kernel's datapath stays as the
# agent left it meanwhile, so answering for it is true. 0: withdraw at once (drain).
DEFAULT_LIVENESS_EXIT_HOLD = 10.0

MAX_COUNT = 100
MAX_BUDGET = 1_000_000.0
# The longest a probe's reply is waited for, whatever the peer's RTT estimate says, unless the interval is longer:
# a late sample (a VM paused for a second) must not keep a dead peer's deadlines seconds away. It may exceed the
# interval: a probe due while one is in flight waits for that one's outcome (magw.health.monitor), so a short
# interval still tolerates a queue longer than itself (a 30 ms interval, a 50 ms queue).
MAX_WAIT = 0.25


def _positive(name: str, value: float) -> None:
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name}: must be > 0 seconds, got {value}")


def _count(name: str, value: int) -> None:
    if not 1 <= value <= MAX_COUNT:
        raise ValueError(f"{name}: must be from 1 to {MAX_COUNT}, got {value}")


@attrs.frozen(kw_only=True)
class ProbeParams:
    """How often and how patiently peers are probed.

    ``interval``: the most seconds between two probes of one peer; each interval
    is reduced by a random fraction of at most ``jitter`` (as BFD does).
    ``min_interval`` and ``budget``: a node that sends ``n`` probes per round (its
    targets' echo ids) probes every ``n / budget`` seconds, within ``min_interval``
    and ``interval`` (``interval_for``): a few peers are probed every 30 ms (the
    wait for the next probe is most of a failover), a hundred no faster than the
    budget of 1,000 probes per second allows. ``budget`` 0: always ``interval``.
    ``gateway_budget``: and no faster than keeps what one target answers from
    every node probing it the same way (a worker's cluster) within this many
    echoes per second: 1,000 workers with 4 ids each probe every 200 ms (so
    ``interval``), not every 30 ms (133,000 echoes/s per gateway). 0: no bound.
    Default ``min_interval``: 30 ms, or ``interval`` if that is shorter.
    ``timeout``: a probe whose reply has not arrived ``timeout`` seconds after it
    was sent is a miss; for a peer whose smoothed round-trip time is larger, 4 x
    that RTT, at most ``max_wait`` (``magw.health.book``).
    ``down_after``: consecutive misses that take an up peer down.
    ``up_after``: consecutive successes that bring a down peer back up.
    ``fast_interval``: the most seconds between two probes of a peer in
    transition: an up peer that missed but is not down yet, or a down peer
    that answered but is not up yet (HAProxy's ``fastinter``). A probe still in
    flight is always waited for: a slow peer's deadline is never cut short.
    Equal to ``interval``: no acceleration. Default: 20 ms, or ``interval`` if that is shorter.
    ``startup_grace``: for this many seconds after the monitor starts, a peer
    never seen answering (UNKNOWN) is not taken down: gateways that start with
    their cluster answer only once their kernels hold their plans. Its misses
    still count, so a dead one goes down at its first miss after the grace.
    """

    interval: float = DEFAULT_INTERVAL
    min_interval: float = attrs.field(
        default=attrs.Factory(lambda self: min(DEFAULT_MIN_INTERVAL, self.interval), takes_self=True)
    )
    budget: float = DEFAULT_BUDGET
    gateway_budget: float = DEFAULT_GATEWAY_BUDGET
    fast_interval: float = attrs.field(
        default=attrs.Factory(lambda self: min(DEFAULT_FAST_INTERVAL, self.interval), takes_self=True)
    )
    timeout: float = DEFAULT_TIMEOUT
    down_after: int = DEFAULT_DOWN_AFTER
    up_after: int = DEFAULT_UP_AFTER
    jitter: float = DEFAULT_JITTER
    startup_grace: float = DEFAULT_STARTUP_GRACE

    def __attrs_post_init__(self) -> None:
        _positive("probe interval", self.interval)
        _positive("probe timeout", self.timeout)
        _positive("probe fast interval", self.fast_interval)
        _positive("probe min interval", self.min_interval)
        if self.min_interval > self.interval:
            interval = f"{self.interval:g}"
            raise ValueError(f"probe min interval: must be <= the probe interval {interval}, got {self.min_interval}")
        if not 0 <= self.budget <= MAX_BUDGET:
            raise ValueError(f"probe budget: must be from 0 to {MAX_BUDGET:g} probes per second, got {self.budget}")
        if not 0 <= self.gateway_budget <= MAX_BUDGET:
            raise ValueError(
                f"probe gateway budget: must be from 0 to {MAX_BUDGET:g} echoes per second, got {self.gateway_budget}"
            )
        if self.fast_interval > self.interval:
            raise ValueError(
                f"probe fast interval: must be <= the probe interval {self.interval:g}, got {self.fast_interval}"
            )
        if not 0 <= self.startup_grace <= 3600:
            raise ValueError(f"probe startup grace: must be from 0 to 3600 seconds, got {self.startup_grace}")
        _count("down after", self.down_after)
        _count("up after", self.up_after)
        if not 0 <= self.jitter < 1:
            raise ValueError(f"probe jitter: must be from 0 to below 1 (a fraction of the interval), got {self.jitter}")
        if self.timeout > self.shortest_interval:
            shortest = f"{self.shortest_interval:g}"
            raise ValueError(f"probe timeout: must be <= the shortest jittered interval {shortest}, got {self.timeout}")

    @property
    def shortest_interval(self) -> float:
        """interval x (1 - jitter): the floor ``timeout`` is at most that. A budget's shorter interval may be shorter
        than the timeout: a probe due while one is in flight waits for it (magw.health.monitor)."""
        return self.interval * (1.0 - self.jitter)

    def interval_for(self, probes_per_round: int, answered_per_round: int = 0) -> float:
        """The interval of a node that sends ``probes_per_round`` probes each round, whose busiest target answers
        ``answered_per_round`` echoes each round from every node probing it this way: the longer of
        ``probes_per_round / budget`` and ``answered_per_round / gateway_budget``, within ``min_interval`` and
        ``interval``."""
        if self.budget <= 0:
            return self.interval
        shared = answered_per_round / self.gateway_budget if self.gateway_budget > 0 else 0.0
        return min(self.interval, max(self.min_interval, probes_per_round / self.budget, shared))

    @property
    def max_wait(self) -> float:
        """The longest a reply is waited for (``MAX_WAIT``, or the shortest jittered interval if that is longer)."""
        return max(MAX_WAIT, self.shortest_interval)


@attrs.frozen(kw_only=True)
class LivenessParams:
    """The liveness set: each element lives ``timeout`` seconds and is renewed every ``refresh`` seconds;
    ``exit_hold``: on a clean exit it is renewed once for that long (0: withdrawn at once)."""

    timeout: float = DEFAULT_LIVENESS_TIMEOUT
    refresh: float = DEFAULT_LIVENESS_REFRESH
    exit_hold: float = DEFAULT_LIVENESS_EXIT_HOLD

    def __attrs_post_init__(self) -> None:
        _positive("lease timeout", self.timeout)
        _positive("lease refresh", self.refresh)
        if self.refresh * 2 > self.timeout:
            raise ValueError(
                f"lease refresh: must be at most half the lease timeout {self.timeout}, got {self.refresh}"
            )
        if self.timeout < 0.001:
            raise ValueError(f"lease timeout: must be at least 1 ms, got {self.timeout}")
        if not 0 <= self.exit_hold <= 3600:
            raise ValueError(f"lease exit hold: must be from 0 to 3600 seconds, got {self.exit_hold}")
