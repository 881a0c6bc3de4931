"""A route agent hosting the OVN syncer: ``magw-route-agent --ovn-nb REMOTE --ovn-sb REMOTE``.

The syncer then plans from the same source as the agent and from the agent's data-plane health
(``HealthMonitor.health_view``): a local gateway the probes take down leaves the reroute policies' ECMP sets at
the next sync, which a health change triggers at once. Give these flags to one route agent per cluster (the
syncer is the only writer of magw's NB rows; docs/ovn.md).

The NB/SB connection is made lazily, inside the first sync (in its worker thread): a database that is not up
yet is a failed sync, logged and retried with the syncer's backoff, never a failed agent.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from magw.daemons.common.flags import ovsdb_remote
from magw.daemons.route_agent.ovn_syncer import OvnSyncer
from magw.desired.ovn.planner import OvnPlan
from magw.desired.ovn.rows import OvnState
from magw.desired.ovn.topology import CLUSTER_ROUTER, LB_GROUP
from magw.health.monitor import HealthMonitor
from magw.reconcile.ovndiff import OvnChangeSet
from magw.reconcile.ovnsync import OvnSettings
from magw.sources.base import StateSource

CONNECT_TIMEOUT = 10.0


def add_ovn_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ovn-nb",
        type=ovsdb_remote,
        metavar="REMOTE",
        help="host the OVN syncer: the OVN Northbound database (unix:PATH or tcp:IP:PORT); one agent per cluster",
    )
    p.add_argument(
        "--ovn-sb",
        type=ovsdb_remote,
        metavar="REMOTE",
        help="with --ovn-nb: the OVN Southbound database (its Chassis table)",
    )
    p.add_argument(
        "--ovn-status-file",
        metavar="PATH",  # not checked here, as --status-file (a volume that exists only at run time)
        help="with --ovn-nb: the syncer's JSON status after each sync",
    )
    p.add_argument("--ovn-cluster-router", default=CLUSTER_ROUTER, metavar="NAME", help=argparse.SUPPRESS)
    p.add_argument("--ovn-lb-group", default=LB_GROUP, metavar="NAME", help=argparse.SUPPRESS)


def check_ovn_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if bool(args.ovn_nb) != bool(args.ovn_sb):
        parser.error("--ovn-nb and --ovn-sb: give both or neither")
    if args.ovn_status_file and not args.ovn_nb:
        parser.error("--ovn-status-file: only with --ovn-nb")


@attrs.define
class LazyOvnDriver:
    """Connects on first use (in the sync's worker thread) and again after a failed call."""

    nb: str
    sb: str
    timeout: float = CONNECT_TIMEOUT
    _driver: Any = attrs.field(init=False, default=None)

    def _get(self) -> Any:
        if self._driver is None:
            from magw.drivers.ovn import connect  # lazy: agents without --ovn-nb never import ovsdbapp

            self._driver = connect(self.nb, self.sb, timeout=self.timeout)
        return self._driver

    def _call(self, name: str, *args: Any) -> Any:
        driver = self._get()
        try:
            return getattr(driver, name)(*args)
        except Exception as exc:
            from magw.drivers.ovn.nbrows import OvnInputError

            # A refused input (a missing router, a row gone during the sync) came over a working connection:
            # keep it. Anything else may be a broken connection: the next sync rebuilds it.
            if not isinstance(exc, OvnInputError):
                self.close()
            raise

    def observe(self) -> OvnState:
        state: OvnState = self._call("observe")
        return state

    def chassis_by_hostname(self) -> dict[str, str]:
        chassis: dict[str, str] = self._call("chassis_by_hostname")
        return chassis

    def apply(self, changes: OvnChangeSet, plan: OvnPlan) -> Any:
        return self._call("apply", changes, plan)

    def close(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            driver.close()


def hosted_syncer(
    args: argparse.Namespace, source: StateSource, health: HealthMonitor | None, resync_period: float
) -> OvnSyncer | None:
    """The syncer a route agent runs beside its reconciler, or None without ``--ovn-nb``."""
    if not args.ovn_nb:
        return None
    syncer = OvnSyncer(
        source,
        LazyOvnDriver(args.ovn_nb, args.ovn_sb),
        planning=health.health_view if health is not None else (lambda s: s),
        settings=OvnSettings(cluster_router=args.ovn_cluster_router, lb_group=args.ovn_lb_group or None),
        resync_period=resync_period,
        status_file=args.ovn_status_file,
    )
    if health is not None:  # after the agent set its own listener: a health change also syncs the NB at once
        agent_listener = health.on_change

        def on_change(view: Any) -> None:
            if agent_listener is not None:
                agent_listener(view)
            syncer.mark_dirty("health")

        health.on_change = on_change
    return syncer
