"""The health monitor: probes peers, keeps their up/down states, holds this node's liveness set, reports Health.

It lives in the route agent's process (the node's namespace) and runs two
asyncio tasks until ``stop``:

- the probe loop: every target is probed every ``interval`` (less jitter) on
  one ping socket per echo id, every ``fast_interval`` while one of its
  states is in transition (a miss of an up peer, a reply of a down one),
  never while a probe of it is still in flight; replies are read as they
  arrive, misses are
  counted at each probe's deadline (``book``); outcomes drive one ``ProbeState``
  per (peer VTEP, echo id). When the Health they say changes, ``on_change``
  gets it at once (the route agent replans and syncs: no round trip through the source);
  ``on_transition`` hears of every state change (the status file).
- the liveness loop: renews ``ip magw_health``'s liveness set every ``refresh`` seconds
  on a gateway node (and at once when the ids to answer change), through a
  ``LivenessKeeper``: libnftables runs in its worker thread, never on the loop.

``update(snapshot)`` feeds the source's snapshot; ``planning_snapshot`` gives
the planner that snapshot with the probed health merged in; with
``require_sync``, the liveness set is filled only once ``synced(True)`` said the
kernel holds a plan made since the node's own Endpoint was (re)published: a
gateway coming back answers once its tunnel is built. Peers present at
the first plan start UNKNOWN (usable); peers that appear after ``down_after``
intervals start PENDING (unusable until they answer), in multi-active mode; for
``startup_grace`` seconds an UNKNOWN peer is not taken down. Everything
decided here comes from the pure modules (``targets``, ``view``,
``statemachine``, ``book``); this file only moves packets and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any

import attrs
import structlog

from magw.health.book import Outcome, ProbeBook, StateKey, jittered
from magw.health.echoids import ALIVE_ID
from magw.health.events import TransitionLog
from magw.health.liveness import LivenessKeeper, LivenessTable, LivenessTableLike
from magw.health.params import LivenessParams, ProbeParams
from magw.health.probe import EchoSocket, Reply
from magw.health.schedule import SendSchedule
from magw.health.statemachine import NEW_AT_START, NEW_LATER, FailPolicy, PeerState, ProbeState
from magw.health.targets import NO_PLAN, ProbePlan, ProbeTarget, probe_plan
from magw.health.view import liveness_ids, merged, probed_health, published, status_document
from magw.model import Health, Snapshot

log = structlog.get_logger(__name__)

# A gateway whose alive state came back up waits for its reach ids on their way up for at most this many
# times up_after successes in all (the admission barrier, docs/health.md): long enough for reach ids whose
# first answers came a probe or two after the alive id's, short enough that a reach id which keeps failing
# does not keep the gateway out.
ADMISSION_HOLD = 2

OnChange = Callable[[Health], None]
SocketFactory = Callable[[int], EchoSocket]
LivenessFactory = Callable[[], LivenessTableLike]


class HealthMonitor:
    """Probes, states and the liveness set of one node (see the module docstring)."""

    def __init__(
        self,
        node: str,
        *,
        probe: ProbeParams,
        liveness: LivenessParams,
        netns: str | None = None,
        on_change: OnChange | None = None,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        sockets: SocketFactory | None = None,
        liveness_table: LivenessFactory | None = None,
        require_sync: bool = False,
    ) -> None:
        self.node = node
        self.params = probe
        self.liveness_params = liveness
        self.netns = netns
        self.on_change = on_change
        self.on_transition: Callable[[], None] | None = None
        self.on_answer: Callable[[ProbeTarget, float], None] | None = None  # an alive probe's RTT (the metrics)
        self._rng = rng
        self._clock = clock
        self._new_socket: SocketFactory = sockets or (lambda echo_id: EchoSocket(echo_id, netns=netns))
        new_table: LivenessFactory = liveness_table or (lambda: LivenessTable(liveness, netns=netns))
        self._liveness = LivenessKeeper(
            new_table, node=node, exit_hold=liveness.exit_hold
        )  # libnftables calls run in its own worker thread
        self._snapshot: Snapshot | None = None
        self._plan: ProbePlan = NO_PLAN
        self._states: dict[StateKey, ProbeState] = {}
        self._book = ProbeBook(timeout=probe.timeout, cap=probe.max_wait)
        self._sockets: dict[int, EchoSocket] = {}
        self._interval = probe.interval  # the probe interval for the current targets (ProbeParams.interval_for)
        self._schedule = SendSchedule()  # when each target is next probed (a heap: magw.health.schedule)
        self._by_address: dict[IPv4Address, ProbeTarget] = {}
        self._last_send: dict[IPv4Address, float] = {}
        self._health = Health()
        self._returning: set[IPv4Address] = set()  # alive again, reach ids maybe still settling
        self._liveness_ids: frozenset[int] | None = None
        self._liveness_provisional = False
        self._liveness_dirty = asyncio.Event()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.transitions = 0
        self.events = TransitionLog()  # since when each state holds, the last changes, listeners (metrics)
        self._started_at: float | None = None
        self._require_sync = require_sync
        self._planned_role: bool | None = None
        self._ready_role: bool | None = None

    # ----- inputs and outputs --------------------------------------------------------------------

    @property
    def health(self) -> Health:
        """What the probes say (without the source's Health document)."""
        return self._health

    @property
    def interval(self) -> float:
        """The probe interval for the current targets (``ProbeParams.interval_for``: the budget's)."""
        return self._interval

    @property
    def plan(self) -> ProbePlan:
        return self._plan

    @property
    def liveness_ids(self) -> frozenset[int] | None:
        """The echo ids this node answers (None: it is no gateway, there is no liveness table)."""
        return self._liveness_ids

    def planning_snapshot(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the probed health merged into its own, for the planner (remembers the role planned)."""
        merged_snapshot = self._merged(snapshot)
        self._planned_role = published(merged_snapshot, self.node)
        return merged_snapshot

    def health_view(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the probed health merged in, for another consumer than this node's planner (the
        OVN syncer a route agent hosts): unlike ``planning_snapshot`` it remembers nothing."""
        return self._merged(snapshot)

    def synced(self, ok: bool) -> None:
        """The route agent's sync of the last plan ended (``ok``: nothing failed): the kernel holds that plan."""
        if ok and self._planned_role is not None:
            self._ready_role = self._planned_role
            self._update_liveness()

    def _merged(self, snapshot: Snapshot) -> Snapshot:
        if not self._health.down and not self._health.reach:
            return snapshot
        return attrs.evolve(snapshot, health=merged(snapshot.health, self._health))

    def update(self, snapshot: Snapshot | None) -> None:
        """A new snapshot from the source: re-derive targets and liveness ids (call from the event loop's thread)."""
        self._snapshot = snapshot
        self._retarget()

    def states(self) -> dict[StateKey, ProbeState]:
        return dict(self._states)

    # ----- planning ------------------------------------------------------------------------------

    def _retarget(self) -> None:
        """Targets and liveness ids from the snapshot and the current health; repeat until the role settles."""
        for _ in range(3):  # single-gateway mode: health -> active gateway -> role -> targets -> health
            snapshot = self._snapshot
            plan = NO_PLAN if snapshot is None else probe_plan(self._merged(snapshot), self.node)
            if plan != self._plan:
                self._set_plan(plan)
            if not self._refresh_health():
                break
        self._update_liveness()

    def _set_plan(self, plan: ProbePlan) -> None:
        keys = plan.keys
        self._states = {k: v for k, v in self._states.items() if k in keys}
        if self._started_at is None:
            self._started_at = self._clock()
        elif self._clock() > self._started_at + self.params.interval * self.params.down_after:
            for target in plan.targets:  # a gateway that appears now carries traffic once it has answered
                for echo_id in target.echo_ids if target.late_pending else ():
                    self._states.setdefault((target.address, echo_id), NEW_LATER)
        self._book.forget(keys)
        self.events.forget(set(keys))
        interval = self.params.interval_for(plan.probes_per_round, plan.answered_per_round)
        if interval != self._interval:
            log.info("health.interval", node=self.node, interval=round(interval, 4), was=round(self._interval, 4))
            self._interval = interval
        now = self._clock()
        addresses = {t.address for t in plan.targets}
        self._schedule.keep(addresses)
        self._last_send = {a: t for a, t in self._last_send.items() if a in addresses}
        for target in plan.targets:
            if self._schedule.get(target.address) is None:
                self._schedule.set(target.address, now + self._rng() * self._interval)
        self._by_address = {t.address: t for t in plan.targets}
        log.info(
            "health.targets",
            node=self.node,
            mode=plan.mode,
            targets=",".join(t.hostname for t in plan.targets),
            echo_ids=",".join(str(i) for i in sorted(plan.echo_ids)),
        )
        self._plan = plan
        self._sync_sockets()
        self._wake.set()

    def _refresh_health(self) -> bool:
        """Recompute the probed Health; True (and ``on_change`` called) when it changed."""
        hold = ADMISSION_HOLD * self.params.up_after
        for address in list(self._returning):  # returning for at most ``hold`` successes (docs/health.md)
            alive = self._states.get((address, ALIVE_ID), NEW_AT_START)
            if alive.state is not PeerState.UP or alive.successes >= hold:
                self._returning.discard(address)
        health = probed_health(self._plan, self._states, returning=self._returning)
        if health == self._health:
            return False
        self._health = health
        if self.on_change is not None:
            try:
                self.on_change(health)
            except Exception as exc:  # a listener's bug must not stop probing
                log.exception("health.listener_failed", error=repr(exc))
        return True

    def _update_liveness(self) -> None:
        snapshot = None if self._snapshot is None else self._merged(self._snapshot)
        ready = not self._require_sync or (snapshot is not None and self._ready_role == published(snapshot, self.node))
        ids = None if snapshot is None else liveness_ids(snapshot, self.node, snapshot.health, ready=ready)
        self._liveness_provisional = snapshot is not None and not ready
        if ids != self._liveness_ids:
            log.info("health.leases", node=self.node, echo_ids=None if ids is None else sorted(ids))
            self._liveness_ids = ids
            self._liveness_dirty.set()

    # ----- sockets -------------------------------------------------------------------------------

    def _sync_sockets(self) -> None:
        wanted = self._plan.echo_ids
        for echo_id in [i for i in self._sockets if i not in wanted]:
            self._close_socket(echo_id)
        for echo_id in sorted(wanted - self._sockets.keys()):
            try:
                sock = self._new_socket(echo_id)
            except (OSError, RuntimeError) as exc:  # probes of this id miss; the next retarget tries again
                log.error("health.socket_failed", node=self.node, echo_id=echo_id, error=str(exc))
                continue
            self._sockets[echo_id] = sock
            if self._loop is not None:
                self._loop.add_reader(sock.fileno(), self._drain_one, echo_id)

    def _close_socket(self, echo_id: int) -> None:
        sock = self._sockets.pop(echo_id)
        if self._loop is not None:
            self._loop.remove_reader(sock.fileno())
        sock.close()

    def _drain_one(self, echo_id: int) -> None:
        sock = self._sockets.get(echo_id)
        if sock is not None:
            self._received(echo_id, sock.replies())

    def _drain(self) -> None:
        for echo_id in list(self._sockets):
            self._drain_one(echo_id)

    def _received(self, echo_id: int, replies: list[Reply]) -> None:
        outcomes = []
        for reply in replies:
            outcome = self._book.received((reply.address, echo_id), reply.seq, reply.at)
            if outcome is not None:
                outcomes.append(outcome)
        if outcomes:
            self._apply(outcomes)

    # ----- states --------------------------------------------------------------------------------

    def _target(self, address: IPv4Address) -> ProbeTarget | None:
        return self._by_address.get(address)

    def _apply(self, outcomes: list[Outcome]) -> None:
        changed = False
        now = self._clock()
        for outcome in outcomes:
            target = self._target(outcome.key[0])
            if target is None:
                continue
            if outcome.success:
                self.events.answered(outcome.key, now)
                if self.on_answer is not None and outcome.rtt is not None and outcome.key[1] == ALIVE_ID:
                    self.on_answer(target, outcome.rtt)
            old = self._states.get(outcome.key, NEW_AT_START)
            new = old.observe(outcome.success, self.params, policy=self._policy(target))
            self._states[outcome.key] = new
            if old.state is PeerState.UP and old.misses == 0 and new.misses == 1:
                # where a failover's time goes starts here (benchmarks/failover.py splits the loss window)
                log.info("health.first_miss", node=self.node, peer=target.hostname, address=str(target.address),
                         echo_id=outcome.key[1])  # fmt: skip
            if new.in_transition(self._policy(target)):
                self._hurry(target.address)
            if outcome.key[1] == ALIVE_ID and old.state is PeerState.DOWN and new.state is PeerState.UP:
                self._returning.add(target.address)  # the admission barrier (magw.health.view.probed_health)
            if new.state is not old.state:
                changed = True
                self.transitions += 1
                self._log_transition(target, outcome.key[1], old, new, now)
        if changed or self._returning:  # a returning gateway's barrier may lift without a transition (a miss)
            self._retarget()
        if changed and self.on_transition is not None:
            try:
                self.on_transition()
            except Exception as exc:  # a listener's bug must not stop probing
                log.exception("health.listener_failed", error=repr(exc))

    def _policy(self, target: ProbeTarget) -> FailPolicy:
        """The target's fail policy; during the startup grace an unseen peer cannot fail yet (``after_seen``)."""
        started = self._started_at
        in_grace = started is not None and self._clock() < started + self.params.startup_grace
        return "after_seen" if in_grace and target.policy == "always" else target.policy

    def _hurry(self, address: IPv4Address) -> None:
        """Probe ``address`` next at the fast interval after its last probe (it is in transition)."""
        last = self._last_send.get(address)
        if last is None:
            return
        fast = last + jittered(self.params.fast_interval, self.params.jitter, self._rng())
        due = self._schedule.get(address)
        if due is None or fast < due:
            self._schedule.set(address, fast)
            self._wake.set()  # the probe loop may sleep until the slower time

    def _log_transition(self, target: ProbeTarget, echo_id: int, old: ProbeState, new: ProbeState, now: float) -> None:
        what = "alive" if echo_id == ALIVE_ID else next((c for c, i in self._plan.reach if i == echo_id), "?")
        event = self.events.changed(
            (target.address, echo_id),
            now,
            peer=target.hostname,
            cluster=target.cluster,
            address=str(target.address),
            what=what,
            old=old.state.value,
            new=new.state.value,
        )
        log.info(
            "health.state_changed",
            node=self.node,
            peer=target.hostname,
            address=str(target.address),
            echo_id=echo_id,
            what=what,
            old=old.state.value,
            new=new.state.value,
            detection_seconds=None if event.detection is None else round(event.detection, 4),
        )

    # ----- the loops -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Probe and hold the liveness set until ``stop`` is set; then release it and close everything."""
        self._loop = asyncio.get_running_loop()
        for echo_id, sock in self._sockets.items():
            self._loop.add_reader(sock.fileno(), self._drain_one, echo_id)
        log.info(
            "health.started",
            node=self.node,
            interval=self._interval,
            max_interval=self.params.interval,
            budget=self.params.budget,
            fast_interval=self.params.fast_interval,
            timeout=self.params.timeout,
            down_after=self.params.down_after,
            up_after=self.params.up_after,
            lease_timeout=self.liveness_params.timeout,
        )
        tasks = [
            asyncio.create_task(self._probe_loop(stop), name="health-probe"),
            asyncio.create_task(self._liveness_loop(stop), name="health-lease"),
        ]
        try:
            await stop.wait()
        finally:
            self._wake.set()
            self._liveness_dirty.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for echo_id in list(self._sockets):
                self._close_socket(echo_id)
            await self._liveness.release()
            log.info("health.stopped", node=self.node, transitions=self.transitions)

    async def _probe_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            wake_at = self.tick(self._clock())
            self._wake.clear()
            delay = None if wake_at is None else max(wake_at - self._clock(), 0.0)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    def tick(self, now: float) -> float | None:
        """Read replies, count misses, send what is due; returns when to tick again."""
        self._drain()
        misses = self._book.expire(now)
        if misses:
            self._apply(misses)
        # Only the due targets are looked at (a heap): O(log n) per probe, not O(targets) per tick.
        for address in self._schedule.held:  # due while in flight: due again once the outcome is known
            held = self._by_address.get(address)
            if held is None or not self._in_flight(held):
                self._schedule.release(address)
        for address in self._schedule.pop_due(now):
            target = self._by_address.get(address)
            if target is None:
                continue
            if self._in_flight(target):
                self._schedule.hold(address)  # a probe in flight is waited for: its deadline (below) comes first
                continue
            self._send(target)
            self._last_send[address] = now
            self._schedule.set(address, now + jittered(self._interval, self.params.jitter, self._rng()))
        times = [t for t in (self._schedule.earliest(), self._book.next_deadline()) if t is not None]
        return min(times) if times else None

    def _in_flight(self, target: ProbeTarget) -> bool:
        return any(self._book.waiting((target.address, i)) for i in target.echo_ids)

    def _send(self, target: ProbeTarget) -> None:
        for echo_id in target.echo_ids:
            sock = self._sockets.get(echo_id)
            if sock is None:
                continue
            seq = self._book.sent((target.address, echo_id), self._clock())  # the send's own time, not the tick's
            sock.send(target.address, seq)

    async def _liveness_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._liveness_dirty.clear()
            # renew, install, or remove (None: no gateway role); before the first sync, adopt a held liveness set
            await self._liveness.hold(self._liveness_ids, provisional=self._liveness_provisional)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.liveness_params.refresh):
                    await self._liveness_dirty.wait()

    # ----- status --------------------------------------------------------------------------------

    def status_json(self) -> dict[str, Any]:
        """Targets with their states, as plain JSON (for the route agent's status file)."""
        rtts = {}
        for t in self._plan.targets:
            stats = self._book.rtt_stats((t.address, ALIVE_ID))
            if stats is not None:
                rtts[(t.address, ALIVE_ID)] = stats.as_json()
        doc = status_document(
            self._plan, self._states, self._health, self._liveness_ids, rtts, since=self.events.since_iso
        )
        doc["transitions"] = [event.as_json() for event in self.events.recent()]
        return doc
