"""The route agent: keeps this node's whole plan in the kernel of the namespace it runs in.

It runs on every node, inside the node's network namespace: it follows the file
broker, plans the node (worker or gateway role) with the strategy the kernel
supports, and reconciles links, addresses, neighbors, FDB entries, nexthops,
groups, routes, rules and our nftables table through one Reconciler. It also
sets ``net.ipv4.fib_multipath_hash_policy=1`` in that namespace. With ``cni: ovn``
it plans the OVN node side and, given ``--ovs-db``, keeps ``br-submariner``
(magw.agent.ovn_node, docs/ovn-node.md). SIGTERM or
SIGINT stops it cleanly (exit 0); after a SIGKILL a restart converges again,
because every sync compares the kernel with the plan.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from ipaddress import IPv4Address
from typing import Any

import attrs
import structlog
from prometheus_client import REGISTRY, CollectorRegistry

from magw.agent.drivers import LazyDriver, fake_driver, real_node_driver
from magw.agent.egress_problems import EgressProblems
from magw.agent.health_options import HealthSettings, add_health_arguments, endpoint_ttl, health_settings
from magw.agent.healthcheck import build_monitor
from magw.agent.options import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, OneLineParser, common_parser, parse
from magw.agent.ovn_host import add_ovn_arguments, check_ovn_arguments, hosted_syncer
from magw.agent.ovn_node import add_ovn_node_arguments, check_ovn_node_arguments, ovn_node_driver
from magw.agent.ovn_syncer import OvnSyncer
from magw.agent.runner import run_until_signalled, start_metrics, write_json_atomic
from magw.desired.memo import PlanMemo
from magw.desired.planner import plan
from magw.desired.state import DesiredState
from magw.drivers.netns import current_netns_refusal
from magw.health.monitor import HealthMonitor
from magw.logsetup import configure_logging
from magw.model import Cni, Strategy
from magw.reconcile.driver import Driver
from magw.reconcile.loop import Reconciler, SyncResult
from magw.sources.base import StateSource
from magw.sources.filebroker import FileBroker

log = structlog.get_logger(__name__)

SWITCH_INTERVAL = 0.001  # seconds: sys.setswitchinterval of the daemon (see main)

StrategyPicker = Callable[[Strategy], Strategy]


@attrs.define
class RouteAgent:
    """One node's reconciler fed by a state source: the file broker or the Kubernetes API."""

    broker: StateSource  # the file broker or the Kubernetes source
    node: str
    driver: Driver
    resync_period: float
    pick_strategy: StrategyPicker = lambda requested: requested
    # Each instance its own registry unless given one (main() passes the global REGISTRY): a second instance
    # in one process must not collide with the first (prometheus refuses duplicate timeseries).
    registry: CollectorRegistry | None = attrs.field(factory=CollectorRegistry)
    status_file: str | None = None
    health: HealthMonitor | None = None
    ovn: OvnSyncer | None = None  # the OVN syncer this agent hosts (--ovn-nb), run beside the reconciler
    ovn_mgmt_nexthop: IPv4Address | None = None  # --ovn-mgmt-nexthop (cni ovn: table 150's next hop)
    cni: Cni = Cni.GENERIC  # the CNI of the last plan (the OVN node driver prepares the bridge only for ovn)
    # The periodic resync's observe on a second driver, in a thread of its own (magw.reconcile.audit): at 100k
    # routes it takes seconds, and events are synced meanwhile. None: the resync observes on the sync path.
    audit: Callable[[], DesiredState] | None = None
    reconciler: Reconciler = attrs.field(init=False)
    not_ready: str | None = attrs.field(init=False, default=None)
    _strategies: dict[Strategy, Strategy] = attrs.field(init=False, factory=dict)
    _last_sync: SyncResult | None = attrs.field(init=False, default=None)
    egress_problems: EgressProblems = attrs.field(init=False)
    # The last plan's pieces (magw.desired.memo): a broker change re-plans only what it touched. Used only in
    # the reconciler's worker thread, one plan at a time.
    memo: PlanMemo = attrs.field(init=False, factory=PlanMemo)

    def __attrs_post_init__(self) -> None:
        self.egress_problems = EgressProblems(self.node)
        self.reconciler = Reconciler(
            self.driver,
            self.plan,
            resync_period=self.resync_period,
            name="route_agent",
            registry=self.registry,
            inputs_synced=lambda: self.broker.initial_sync_done,
            on_sync=self._on_sync,
            audit=self.audit,
        )
        if self.health is not None:  # a health change replans at once: a partial sync, no broker round trip
            self.health.on_change = lambda _health: self.reconciler.mark_dirty("health")
            self.health.on_transition = lambda: self._on_sync(None)  # keep the status file's peer states fresh
            self.broker.subscribe(self.health.update)
        self.broker.subscribe(lambda _snapshot: self.reconciler.mark_dirty("broker"))

    def _strategy(self, requested: Strategy) -> Strategy:
        if requested not in self._strategies:  # pick once per requested strategy: the fallback is logged once
            self._strategies[requested] = self.pick_strategy(requested)
        return self._strategies[requested]

    def _waiting(self, reason: str) -> None:
        if reason != self.not_ready:
            log.info("route_agent.waiting", node=self.node, reason=reason)
        self.not_ready = reason

    def plan(self) -> DesiredState | None:
        """This node's desired state, or None while the broker has not given us our node."""
        snapshot = self.broker.snapshot
        if not self.broker.initial_sync_done or snapshot is None:
            self._waiting(f"no snapshot of cluster {self.broker.local_cluster} in {self.broker.directory} yet")
            return None
        if self.node not in {n.name for n in snapshot.nodes}:
            self._waiting(f"node {self.node} is not in cluster {snapshot.local_cluster}'s Node documents")
            return None
        self.not_ready = None
        if self.health is not None:
            snapshot = self.health.planning_snapshot(snapshot)
        strategy = self._strategy(snapshot.config.strategy)
        if strategy is not snapshot.config.strategy:
            snapshot = attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, strategy=strategy))
        self.cni = snapshot.config.cni
        self.egress_problems.check(snapshot)
        return plan(snapshot, self.node, ovn_mgmt_nexthop=self.ovn_mgmt_nexthop, memo=self.memo)

    def _on_sync(self, result: SyncResult | None) -> None:
        self._last_sync = result if result is not None else self._last_sync
        if result is not None and result.planned and self.health is not None:
            self.health.synced(result.ok)  # the lease waits until the kernel holds this node's role
        if self.status_file is not None:
            try:
                write_json_atomic(self.status_file, self.status_json(self._last_sync))
            except OSError as exc:
                log.error("route_agent.status_file_failed", path=self.status_file, error=str(exc))

    def status_json(self, last: SyncResult | None) -> dict[str, Any]:
        """The status file: a summary plus every object that is not done."""
        status = self.reconciler.status_json()  # the objects that are not done, cheaply
        status["node"] = self.node
        status["cluster"] = self.broker.local_cluster
        status["waiting"] = self.not_ready
        if self.health is not None:
            status["health"] = self.health.status_json()
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
        self.broker.scan()
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
        """Follow the broker and reconcile until ``stop`` is set."""
        self.broker.scan()
        tasks = {
            asyncio.create_task(self.broker.run(), name="broker"),
            asyncio.create_task(self.reconciler.run(), name="reconciler"),
        }
        health_stop = asyncio.Event()
        if self.health is not None:
            tasks.add(asyncio.create_task(self.health.run(health_stop), name="health"))
        if self.ovn is not None:
            tasks.add(asyncio.create_task(self.ovn.run(health_stop), name="ovn-syncer"))
        stopper = asyncio.create_task(stop.wait(), name="stop")
        done, _ = await asyncio.wait({*tasks, stopper}, return_when=asyncio.FIRST_COMPLETED)
        code = EXIT_OK
        for task in done & tasks:
            code = EXIT_FAILURE
            exc = None if task.cancelled() else task.exception()
            log.error("route_agent.crashed", task=task.get_name(), error=repr(exc))
        self.reconciler.stop()
        self.broker.stop()
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


def build_parser() -> OneLineParser:
    p = common_parser("magw-route-agent", "Program this node's magw plan into the namespace it runs in.")
    p.add_argument("--once", action="store_true", help="one full sync, then exit (0: converged, 1: failures)")
    p.add_argument("--fake", action="store_true", help="use the in-memory fake node driver (no kernel, no root)")
    p.add_argument("--status-file", metavar="PATH", help="write a JSON status after every sync (atomic replace)")
    p.add_argument(
        "--allow-init-netns",
        action="store_true",
        help="allow programming the host's initial network namespace, or one we cannot tell apart (default: refuse)",
    )
    p.add_argument(
        "--cni-interface",
        metavar="NAME",
        help="--source kube: publish this interface's first IPv4 address as the node's CNI address (default: the "
        "first local address inside the cluster's pod CIDRs)",
    )
    p.add_argument(
        "--egress",
        action="store_true",
        help="--source kube: also read the egress gateway's EgressVIP/EgressConfig objects and the workloads, and "
        "plan its datapath (needs their CRDs; the file broker reads them whenever they are there)",
    )
    add_health_arguments(p)
    add_ovn_arguments(p)
    add_ovn_node_arguments(p)
    return p


def _prepare_kernel() -> StrategyPicker:
    """Detect what the kernel supports and set the multipath hash policy, here (the node's namespace)."""
    from magw.drivers.netlink.capabilities import detect, set_hash_policy

    caps = detect(None)
    log.info("route_agent.capabilities", nexthops=caps.nexthops, resilient=caps.resilient, kernel=caps.kernel)
    try:
        set_hash_policy(None)
    except (OSError, RuntimeError) as exc:
        log.error("route_agent.hash_policy_failed", error=str(exc))
    return caps.strategy


async def _run(args: argparse.Namespace, health: HealthSettings | None) -> int:
    driver, picker, audit = await _driver(args)
    if args.source == "kube":
        from magw.agent.kube_route_agent import run_kube

        return await run_kube(args, lambda source: _agent(args, health, source, driver, picker, audit))
    agent = _agent(
        args,
        health,
        FileBroker(args.broker_dir, local_cluster=args.cluster, endpoint_ttl=endpoint_ttl(args)),
        driver,
        picker,
        audit,
    )
    log.info("route_agent.started", node=args.node, cluster=args.cluster, fake=args.fake, once=args.once)
    if args.once:
        return await agent.once()
    start_metrics(args.metrics_port, registry=REGISTRY)
    return await run_until_signalled("route_agent", agent.serve)


async def _driver(args: argparse.Namespace) -> tuple[Driver, StrategyPicker, Driver | None]:
    """The node driver, the strategy picker, and the second driver the periodic resync's audit observes with
    (its own sockets, built in the audit's thread; none with ``--fake``, whose resync observes in place)."""
    if args.fake:
        driver: Driver = LazyDriver(fake_driver, what="fake")
        picker: StrategyPicker = lambda requested: requested  # noqa: E731  # the fake supports every strategy
        return driver, picker, None
    picker = await asyncio.to_thread(_prepare_kernel)
    return LazyDriver(real_node_driver, what="kernel"), picker, LazyDriver(real_node_driver, what="kernel audit")


def _agent(
    args: argparse.Namespace,
    health: HealthSettings | None,
    source: StateSource,
    driver: Driver,
    picker: StrategyPicker,
    audit: Driver | None,
) -> RouteAgent:
    made: list[RouteAgent] = []  # the OVN node driver asks the agent (made next) what its last plan was for
    wanted = lambda: bool(made) and made[0].cni is Cni.OVN  # noqa: E731
    agent = RouteAgent(
        broker=source,
        node=args.node,
        driver=ovn_node_driver(args, driver, wanted),
        audit=None if audit is None else ovn_node_driver(args, audit, wanted).observe,
        resync_period=args.resync_period,
        pick_strategy=picker,
        status_file=args.status_file,
        health=build_monitor(args.node, health, allow_initial=args.allow_init_netns),
        registry=REGISTRY,
        ovn_mgmt_nexthop=args.ovn_mgmt_nexthop,
    )
    made.append(agent)
    agent.ovn = hosted_syncer(args, source, agent.health, args.resync_period)
    return agent


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    health = health_settings(parser, args)
    check_ovn_arguments(parser, args)
    check_ovn_node_arguments(parser, args)
    configure_logging(args.log_format, args.log_level)
    refused = None if args.fake else current_netns_refusal("program", allow=args.allow_init_netns)
    if refused is not None:  # the host's namespace, or one we cannot tell from it
        parser.error(refused)
    # The loop waits for the GIL while the reconciler's or the broker's worker thread computes: at most the
    # switch interval, 5 ms by default; 1 ms keeps probe replies on time (benchmarks/loop_lag.py, docs/health.md).
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        return asyncio.run(_run(args, health))
    except OSError as exc:  # e.g. the metrics port is taken
        log.error("route_agent.failed", error=str(exc))
        return EXIT_FAILURE


__all__ = ["EXIT_USAGE", "RouteAgent", "build_parser", "main"]
