"""``magw ovn``: the OVN network plugin syncer's plan, one-shot and continuous syncs, cleanup and view.

    magw ovn plan    --snapshot FILE [--chassis HOST=CHASSIS ...] [--nbctl]
    magw ovn sync    --nb unix:NB --sb unix:SB --broker-dir DIR --cluster ID [--once] [--status-file F]
    magw ovn show    --nb unix:NB --sb unix:SB
    magw ovn cleanup --nb unix:NB --sb unix:SB [--dry-run]

``plan`` is pure (no database). ``sync`` without ``--once`` is the standalone syncer daemon: it follows the
file broker (its health section and Endpoints that expire); for failover driven by data-plane probes, run
the syncer inside a route agent instead (``magw-route-agent --ovn-nb ... --ovn-sb ...``, docs/ovn.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from contextlib import closing

import structlog

from magw.cli import UsageError
from magw.daemons.common.flags import ovsdb_remote
from magw.daemons.route_agent.health_flags import DEFAULT_ENDPOINT_TTL
from magw.desired.ovn.nbctl import batch_argv, lb_group_lookups, state_commands
from magw.desired.ovn.planner import OvnInputs, OvnPlanError, plan_ovn
from magw.desired.ovn.rows import OvnState
from magw.desired.ovn.topology import CLUSTER_ROUTER, LB_GROUP
from magw.reconcile.ovndiff import ovn_diff
from magw.reconcile.ovnsync import OvnSettings, sync_ovn
from magw.snapshot.load import load_snapshot

log = structlog.get_logger(__name__)


def _db_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--nb",
        required=True,
        type=ovsdb_remote,
        metavar="REMOTE",
        help="the OVN Northbound database (unix:PATH or tcp:IP:PORT)",
    )
    p.add_argument(
        "--sb",
        required=True,
        type=ovsdb_remote,
        metavar="REMOTE",
        help="the OVN Southbound database (its Chassis table)",
    )
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="connect timeout (default 10)")


def _topology_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster-router",
        default=CLUSTER_ROUTER,
        metavar="NAME",
        help=f"OVN-K's cluster router (default {CLUSTER_ROUTER})",
    )
    p.add_argument(
        "--lb-group",
        default=LB_GROUP,
        metavar="NAME",
        help=f"OVN-K's load-balancer group (default {LB_GROUP}; '' for none)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="ovn_command", required=True, metavar="COMMAND")
    p = sub.add_parser("plan", help="print the NB rows the syncer would own (pure: no database)")
    p.add_argument("--snapshot", required=True, metavar="FILE", help="the snapshot YAML file of the local cluster")
    p.add_argument(
        "--chassis",
        action="append",
        default=[],
        metavar="HOST=CHASSIS",
        help="a gateway's SB chassis name (repeat; default: the hostname itself)",
    )
    p.add_argument("--nbctl", action="store_true", help="print ovn-nbctl commands that create the rows instead")
    _topology_arguments(p)
    p = sub.add_parser("sync", help="sync the NB once (--once) or follow the file broker")
    _db_arguments(p)
    _topology_arguments(p)
    p.add_argument("--broker-dir", required=True, metavar="DIR", help="the file broker's directory")
    p.add_argument("--cluster", required=True, metavar="ID", help="the local cluster id")
    p.add_argument("--once", action="store_true", help="one sync, then exit (0 ok, 1 failed)")
    p.add_argument("--status-file", metavar="PATH", help="write a JSON status after every sync")
    p.add_argument("--resync-period", type=float, default=30.0, metavar="SECONDS", help="full resync (default 30)")
    p.add_argument(
        "--endpoint-ttl",
        type=float,
        default=DEFAULT_ENDPOINT_TTL,
        metavar="SECONDS",
        help="Endpoint documents not touched for SECONDS are gone, so a dead gateway leaves the ECMP sets "
        f"(default {DEFAULT_ENDPOINT_TTL:g}; 0: never)",
    )
    p = sub.add_parser("show", help="print the NB rows magw owns now")
    _db_arguments(p)
    p = sub.add_parser("cleanup", help="delete every NB row magw owns (one transaction), nothing else")
    _db_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted")


def _settings(args: argparse.Namespace) -> OvnSettings:
    return OvnSettings(cluster_router=args.cluster_router, lb_group=args.lb_group or None)


def _connect(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from magw.drivers.ovn import connect  # lazy: `magw ovn plan` needs no ovsdbapp

    # ovsdbapp logs an unreachable database at error level before raising: the OvnConnectError that follows
    # says it in one line already (-vv keeps ovsdbapp's line)
    if args.verbose < 2:
        logging.getLogger(OVSDBAPP_SCHEMA_LOGGER).setLevel(logging.CRITICAL)
    return connect(args.nb, args.sb, timeout=args.timeout)


OVSDBAPP_SCHEMA_LOGGER = "ovsdbapp.backend.ovs_idl.idlutils"


def _rows_text(state: OvnState) -> str:
    return "".join(f"{type(r).__name__} {json.dumps(_fields(r), sort_keys=True)}\n" for r in state.rows())


def _fields(row: object) -> dict[str, object]:
    import attrs

    return {k: v for k, v in attrs.asdict(row).items() if v not in (None, ())}  # type: ignore[arg-type]


def run(args: argparse.Namespace) -> int:
    if args.ovn_command == "plan":
        return _plan(args)
    if args.ovn_command == "sync":
        return _sync(args)
    with closing(_connect(args)) as driver:
        observed = driver.observe()
        if args.ovn_command == "show":
            sys.stdout.write(_rows_text(observed))
            return 0
        changes = ovn_diff(OvnState(), observed)
        for row in changes.deletes:
            print(f"{'would delete' if args.dry_run else 'delete'} {type(row).__name__} {_fields(row)}")
        if not args.dry_run and not changes.empty:
            driver.cleanup()
        log.info("ovn.cleanup_done", rows=len(changes.deletes), dry_run=args.dry_run)
    return 0


def _plan(args: argparse.Namespace) -> int:
    snapshot = load_snapshot(args.snapshot)
    chassis = {e.hostname: e.hostname for e in snapshot.endpoints}
    for item in args.chassis:
        host, sep, name = item.partition("=")
        if not sep or not host or not name:
            raise UsageError(f"--chassis: expected HOST=CHASSIS, got {item!r}")
        chassis[host] = name
    try:
        plan = plan_ovn(
            snapshot,
            OvnInputs(chassis=chassis, cluster_router=args.cluster_router, lb_group=args.lb_group or None),
        )
    except OvnPlanError as exc:
        raise UsageError(str(exc)) from None
    if args.nbctl:
        lookups, groups = lb_group_lookups(plan.needs_lb_groups)  # found by name in the batch: a line to paste
        print("ovn-nbctl " + " ".join(_shell(a) for a in batch_argv([*lookups, *state_commands(plan.state, groups)])))
    else:
        sys.stdout.write(_rows_text(plan.state))
    return 0


def _shell(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def _sync(args: argparse.Namespace) -> int:
    from magw.daemons.common.runner import run_until_signalled
    from magw.daemons.route_agent.ovn_syncer import OvnSyncer
    from magw.sources.file.broker import FileBroker

    broker = FileBroker(
        args.broker_dir, local_cluster=args.cluster, endpoint_ttl=args.endpoint_ttl if args.endpoint_ttl > 0 else None
    )
    with closing(_connect(args)) as driver:
        if args.once:
            broker.scan()
            snapshot = broker.snapshot
            if snapshot is None:
                log.error("ovn.no_snapshot", cluster=args.cluster, broker=args.broker_dir)
                return 1
            result = sync_ovn(driver, snapshot, _settings(args))
            print(json.dumps(result.as_json(), sort_keys=True))
            return 0 if result.ok else 1
        syncer = OvnSyncer(
            broker, driver, settings=_settings(args), resync_period=args.resync_period, status_file=args.status_file
        )

        async def work(stop: asyncio.Event) -> int:
            broker.scan()
            task = asyncio.create_task(broker.run(), name="broker")
            try:
                await syncer.run(stop)
            finally:
                broker.stop()
                await asyncio.gather(task, return_exceptions=True)
            return 0

        return asyncio.run(run_until_signalled("ovn_syncer", work))
