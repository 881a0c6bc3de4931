"""The up/down state machine of one probed thing (a peer, or a peer's reach of one cluster). Pure.

A peer known when the monitor starts is ``UNKNOWN``: it is treated as usable
(innocent until proven otherwise), so a daemon that starts does not withdraw
traffic before its first probes return. A peer that appears later (a new or
re-published Endpoint) starts ``PENDING``: not usable until it answers, so no
traffic goes to a gateway that is still coming up. The first success makes
either ``UP``; ``down_after`` consecutive misses make a peer ``DOWN``; from
``DOWN`` it takes ``up_after`` consecutive successes to come back (hysteresis:
a flapping peer stays down).

Whether misses may take a peer down is its ``FailPolicy``:

- ``always``: the normal case (multi-active mode; the active gateway).
- ``after_seen``: only once it has answered. The active remote gateway in
  single-gateway mode: a standby that just took over has no tunnel yet.
- ``never``: a standby in single-gateway mode. It is not expected to carry
  traffic (a remote standby has no tunnel at all); only its return matters.
"""

from __future__ import annotations

import enum
from typing import Literal

import attrs

from magw.health.params import ProbeParams

FailPolicy = Literal["always", "after_seen", "never"]


class PeerState(enum.Enum):
    UNKNOWN = "unknown"
    PENDING = "pending"
    UP = "up"
    DOWN = "down"


@attrs.frozen(kw_only=True)
class ProbeState:
    """The state and the current run of misses or successes (one of the two is always 0)."""

    state: PeerState = PeerState.UNKNOWN
    misses: int = 0
    successes: int = 0

    @property
    def down(self) -> bool:
        """True when the peer must not carry traffic."""
        return self.state in (PeerState.DOWN, PeerState.PENDING)

    def in_transition(self, policy: FailPolicy = "always") -> bool:
        """True while a run of outcomes is under way that can change whether the peer is usable: misses of an
        UP peer that may fail, or successes of a down peer (the monitor probes it at the fast interval).

        Not the misses of an UNKNOWN peer, one never seen answering: when a cluster starts, its gateways answer
        only once their kernels hold their plans (the liveness set), and confirming at the normal interval gives them
        that time instead of taking them down and up again (which leaves resilient groups unbalanced until
        their idle timer)."""
        if self.state is PeerState.DOWN:
            return self.successes > 0
        return self.state is PeerState.UP and policy != "never" and self.misses > 0

    def observe(self, success: bool, params: ProbeParams, *, policy: FailPolicy = "always") -> ProbeState:
        """The state after one more probe outcome."""
        if success:
            successes = self.successes + 1
            new = self.state in (PeerState.UNKNOWN, PeerState.PENDING)
            up = new or (self.state is PeerState.DOWN and successes >= params.up_after)
            return ProbeState(state=PeerState.UP if up else self.state, misses=0, successes=successes)
        if policy == "never":  # not even counted: when it becomes active its own misses start from zero
            return ProbeState(state=self.state, misses=0, successes=0)
        misses = self.misses + 1
        can_fail = policy == "always" or (policy == "after_seen" and self.state is PeerState.UP)
        state = PeerState.DOWN if can_fail and misses >= params.down_after else self.state
        return ProbeState(state=state, misses=misses, successes=0)


NEW_AT_START = ProbeState()
NEW_LATER = ProbeState(state=PeerState.PENDING)
