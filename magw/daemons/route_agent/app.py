"""The route agent: keeps this node's whole plan in the kernel of the namespace it runs in.

It runs on every node, inside the node's network namespace: it follows its state
source (the file broker or Kubernetes), plans the node (worker or gateway role) with the strategy the kernel
supports, and reconciles links, addresses, neighbors, FDB entries, nexthops,
groups, routes, rules and our nftables table through one Reconciler. It also
sets ``net.ipv4.fib_multipath_hash_policy=1`` in that namespace. With ``cni: ovn``
it plans the OVN node side and, given ``--ovs-db``, keeps ``br-submariner``
(magw.daemons.route_agent.ovn_node, docs/ovn-node.md). SIGTERM or
SIGINT stops it cleanly (exit 0); after a SIGKILL a restart converges again,
because every sync compares the kernel with the plan.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from ipaddress import IPv4Address
from typing import Any

import attrs
import structlog
from prometheus_client import CollectorRegistry

from magw.daemons.common.flags import EXIT_FAILURE, EXIT_OK
from magw.daemons.common.runner import write_json_atomic
from magw.daemons.route_agent.cable import CableDriver
from magw.daemons.route_agent.egressgw_problems import EgressGatewayProblems
from magw.daemons.route_agent.ovn_syncer import OvnSyncer
from magw.daemons.route_agent.shortcut import FailoverShortcut
from magw.desired.cable.values import WgDevice
from magw.desired.node.classes import adopted_main
from magw.desired.node.memo import PlanMemo
from magw.desired.node.paths import fail_static_clusters
from magw.desired.node.planner import plan
from magw.desired.state import DesiredState
from magw.health.monitor import HealthMonitor
from magw.health.natdisc import NatDiscovery
from magw.metrics.route_agent import RouteAgentMetrics
from magw.model import Cni, Health, Strategy
from magw.reconcile.driver import Driver
from magw.reconcile.loop import Reconciler, SyncResult
from magw.sources.base import StateSource

log = structlog.get_logger(__name__)

SWITCH_INTERVAL = 0.001  # seconds: sys.setswitchinterval of the daemon (see main)

StrategyPicker = Callable[[Strategy], Strategy]


@attrs.define
class RouteAgent:
    """One node's reconciler fed by a state source: the file broker or the Kubernetes API."""

    source: StateSource  # the file broker or the Kubernetes source
    node: str
    driver: Driver
    resync_period: float
    pick_strategy: StrategyPicker = lambda requested: requested
    # Each instance its own registry unless given one (main() passes the global REGISTRY): a second instance
    # in one process must not collide with the first (prometheus refuses duplicate timeseries).
    registry: CollectorRegistry | None = attrs.field(factory=CollectorRegistry)
    status_file: str | None = None
    health: HealthMonitor | None = None
    natdisc: NatDiscovery | None = None  # NAT discovery on gateway nodes (--nat-discovery-port; off with --fake)
    ovn: OvnSyncer | None = None  # the OVN syncer this agent hosts (--ovn-nb), run beside the reconciler
    ovn_mgmt_nexthop: IPv4Address | None = None  # --ovn-mgmt-nexthop (cni ovn: table 150's next hop)
    cni: Cni = Cni.GENERIC  # the CNI of the last plan (the OVN node driver prepares the bridge only for ovn)
    cable: CableDriver | None = None  # the WireGuard cable's driver (its state goes into the status file)
    cable_plan: WgDevice | None = attrs.field(init=False, default=None)  # the last plan's WireGuard device
    # The periodic resync's observe on a second driver, in a thread of its own (magw.reconcile.audit): at 100k
    # routes it takes seconds, and events are synced meanwhile. None: the resync observes on the sync path.
    audit: Callable[[], DesiredState] | None = None
    # ``conntrack -L`` of the node, read when the metrics are scraped (magw_gateway_flows); None: not read (--fake)
    conntrack: Callable[[], str | None] | None = None
    # The ids of our nexthop groups the kernel held when the agent started: a worker's shared group keeps the one
    # it finds (magw.desired.node.classes, "Adopting the kernel's group"), so a restart or an upgrade moves no route.
    held_groups: frozenset[int] = frozenset()
    # A gateway the probes take down leaves the kernel's groups at once, before the sync (magw.reconcile.shortcut)
    failover_shortcut: bool = True
    shortcut: FailoverShortcut | None = attrs.field(init=False, default=None)
    reconciler: Reconciler = attrs.field(init=False)
    metrics: RouteAgentMetrics = attrs.field(init=False)
    not_ready: str | None = attrs.field(init=False, default=None)
    # Remote clusters planned by fail static at the last plan: every candidate down, all kept (docs/planner.md)
    fail_static: tuple[str, ...] = attrs.field(init=False, default=())
    _strategies: dict[Strategy, Strategy] = attrs.field(init=False, factory=dict)
    _last_sync: SyncResult | None = attrs.field(init=False, default=None)
    egressgw_problems: EgressGatewayProblems = attrs.field(init=False)
    # The last plan's pieces (magw.desired.node.memo): a source change re-plans only what it touched. Used only in
    # the reconciler's worker thread, one plan at a time.
    memo: PlanMemo = attrs.field(init=False, factory=PlanMemo)

    def __attrs_post_init__(self) -> None:
        self.egressgw_problems = EgressGatewayProblems(self.node)
        self.reconciler = Reconciler(
            self.driver,
            self.plan,
            resync_period=self.resync_period,
            name="route_agent",
            registry=self.registry,
            inputs_synced=lambda: self.source.initial_sync_done,
            on_sync=self._on_sync,
            audit=self.audit,
        )
        if self.health is not None:  # a health change replans at once: a partial sync, no round trip through the source
            # urgent: flows through a dead gateway are lost until the kernel follows (no 10 ms settle)
            if self.failover_shortcut:
                inner = self.cable.inner if self.cable is not None else None  # not the cable's wg check on the loop
                self.shortcut = FailoverShortcut(self.node, self.reconciler, self.health, self.source, inner)
            self.health.on_change = self._health_changed
            self.health.on_transition = lambda: self._on_sync(None)  # keep the status file's peer states fresh
            self.source.subscribe(self.health.update)
        if self.natdisc is not None:  # a path found or lost replans; checked against every new snapshot
            self.natdisc.on_change = lambda: self.reconciler.mark_dirty("natdisc")
            self.natdisc.on_status = lambda: self._on_sync(None)
            self.source.subscribe(self.natdisc.update)
        self.source.subscribe(lambda _snapshot: self.reconciler.mark_dirty("broker"))
        self.metrics = RouteAgentMetrics(
            self.registry,
            node=self.node,
            snapshot=lambda: self.source.snapshot,
            health=self.health,
            transfers=lambda: self.cable.transfers if self.cable is not None else {},
            conntrack=self.conntrack or (lambda: None),
            fail_static=lambda: len(self.fail_static),
        )

    def _health_changed(self, health: Health) -> None:
        if self.shortcut is not None:  # the dead gateway's group replaces first, then the sync for the rest
            self.shortcut.changed(health)
        self.reconciler.mark_dirty("health", urgent=True)
        if self.natdisc is not None:  # a private path that died (or came back) is found again within one check
            self.natdisc.recheck()

    def _strategy(self, requested: Strategy) -> Strategy:
        if requested not in self._strategies:  # pick once per requested strategy: the fallback is logged once
            self._strategies[requested] = self.pick_strategy(requested)
        return self._strategies[requested]

    def _waiting(self, reason: str) -> None:
        if reason != self.not_ready:
            log.info("route_agent.waiting", node=self.node, reason=reason)
        self.not_ready = reason

    def plan(self) -> DesiredState | None:
        """This node's desired state, or None while the source has not given us our node."""
        snapshot = self.source.snapshot
        if not self.source.initial_sync_done or snapshot is None:
            self._waiting(f"no snapshot of cluster {self.source.local_cluster} in {self.source.directory} yet")
            return None
        if self.node not in {n.name for n in snapshot.nodes}:
            self._waiting(f"node {self.node} is not in cluster {snapshot.local_cluster}'s Node documents")
            return None
        self.not_ready = None
        if self.health is not None:
            snapshot = self.health.planning_snapshot(snapshot)
        if self.natdisc is not None:
            snapshot = self.natdisc.planning_snapshot(snapshot)
        strategy = self._strategy(snapshot.config.strategy)
        if strategy is not snapshot.config.strategy:
            snapshot = attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, strategy=strategy))
        self.cni = snapshot.config.cni
        self.egressgw_problems.check(snapshot)
        main = adopted_main(self.held_groups, resilient=strategy is Strategy.RESILIENT)
        state = plan(snapshot, self.node, ovn_mgmt_nexthop=self.ovn_mgmt_nexthop, memo=self.memo, main_group=main)
        self._note_fail_static(fail_static_clusters(snapshot, self.node))
        self.cable_plan = state.cable
        if self.cable is not None:
            # Here, not only in the driver's apply: a change of the cable alone (a peer's rotated key) changes no
            # kernel object of the plan, and the reconciler calls apply only when something differs. Cheap when
            # neither the plan's device nor the key file changed (one stat). Runs in the reconciler's thread.
            self.cable.ensure(force=False)
        return state

    def _note_fail_static(self, clusters: tuple[str, ...]) -> None:
        """Log the clusters that start or stop being planned by fail static (the status file lists them)."""
        began = sorted(set(clusters) - set(self.fail_static))
        ended = sorted(set(self.fail_static) - set(clusters))
        if began:
            log.warning("route_agent.fail_static", node=self.node, clusters=began,
                        reason="every gateway toward them is down: all are kept")  # fmt: skip
        if ended:
            log.info("route_agent.fail_static_ended", node=self.node, clusters=ended)
        self.fail_static = clusters

    def _on_sync(self, result: SyncResult | None) -> None:
        self._last_sync = result if result is not None else self._last_sync
        if result is not None and result.planned and self.health is not None:
            self.health.synced(result.ok)  # the liveness set waits until the kernel holds this node's role
        if self.status_file is not None:
            try:
                write_json_atomic(self.status_file, self.status_json(self._last_sync))
            except OSError as exc:
                log.error("route_agent.status_file_failed", path=self.status_file, error=str(exc))

    def status_json(self, last: SyncResult | None) -> dict[str, Any]:
        """The status file: a summary plus every object that is not done."""
        status = self.reconciler.status_json()  # the objects that are not done, cheaply
        status["node"] = self.node
        status["cluster"] = self.source.local_cluster
        status["waiting"] = self.not_ready
        status["fail_static"] = list(self.fail_static)
        if self.health is not None:
            status["health"] = self.health.status_json()
        if self.cable is not None:
            status["cable"] = self.cable.status_json()
        if self.natdisc is not None and self.natdisc.gateway:
            status["nat_discovery"] = self.natdisc.status_json()
        status["updated_at"] = datetime.now(UTC).isoformat()
        if last is not None:
            status["last_sync"] = {
                "full": last.full,
                "planned": last.planned,
                "changes": len(last.applied),
                "failed": len(last.failures),
                "skipped": last.skipped,
                "deferred": last.deferred,
                "took_ms": last.took_ms,
                "reasons": list(last.reasons),
                "error": last.error,
            }
        return status

    async def once(self) -> int:
        """One full sync; 0 when it ran and nothing failed."""
        self.source.scan()
        try:
            result = await self.reconciler.sync_once(full=True, reasons=("once",))
        finally:
            await self.reconciler.aclose()
        if not result.planned:
            log.error("route_agent.not_ready", node=self.node, reason=self.not_ready or result.error)
            return EXIT_FAILURE
        log.info(
            "route_agent.once_done",
            node=self.node,
            changes=len(result.applied),
            failed=len(result.failures),
            error=result.error,
        )
        ovn_ok = True
        if self.ovn is not None:  # the hosted OVN syncer's one sync (its result goes to the log and its status)
            ovn = await self.ovn.sync()
            ovn_ok = ovn is not None and ovn.ok
            close = getattr(self.ovn.driver, "close", None)
            if close is not None:
                await asyncio.to_thread(close)
        return EXIT_OK if result.ok and ovn_ok else EXIT_FAILURE

    async def serve(self, stop: asyncio.Event) -> int:
        """Follow the source and reconcile until ``stop`` is set."""
        self.source.scan()
        tasks = {
            asyncio.create_task(self.source.run(), name="broker"),
            asyncio.create_task(self.reconciler.run(), name="reconciler"),
        }
        health_stop = asyncio.Event()
        if self.health is not None:
            tasks.add(asyncio.create_task(self.health.run(health_stop), name="health"))
        if self.ovn is not None:
            tasks.add(asyncio.create_task(self.ovn.run(health_stop), name="ovn-syncer"))
        if self.natdisc is not None:
            tasks.add(asyncio.create_task(self.natdisc.run(health_stop), name="natdisc"))
        stopper = asyncio.create_task(stop.wait(), name="stop")
        done, _ = await asyncio.wait({*tasks, stopper}, return_when=asyncio.FIRST_COMPLETED)
        code = EXIT_OK
        for task in done & tasks:
            code = EXIT_FAILURE
            exc = None if task.cancelled() else task.exception()
            log.error("route_agent.crashed", task=task.get_name(), error=repr(exc))
        self.reconciler.stop()
        self.source.stop()
        health_stop.set()
        stopper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopper
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.ovn is not None:
            close = getattr(self.ovn.driver, "close", None)
            if close is not None:
                await asyncio.to_thread(close)
        log.info("route_agent.stopped", node=self.node, syncs=self.reconciler.syncs, code=code)
        return code
