"""``magw apply``: bring a node's namespace to its plan, on the real kernel.

    magw apply --snapshot FILE --node NAME [--netns NS] [--dry-run]

Loads the snapshot, detects what the kernel supports (strategy fallback:
resilient -> group -> multipath), plans the node, sets and verifies
``net.ipv4.fib_multipath_hash_policy=1`` in that namespace, then observes,
diffs and applies. Prints each change and each failure on one line, then a
summary; exit 1 when anything failed. A second run prints ``no changes``.

``--dry-run`` changes nothing in the namespace, not even for an instant: the
capabilities come from read-only dumps (no probe nexthop or group is created;
the guess is printed as a ``dry run: ...`` line), the sysctl is only read, and
the diff is printed, not applied. A route the kernel would refuse because its
``src`` (the node's ``cni_ip``) is no address of the namespace is named on a
``dry run: would fail: ...`` line, and the dry run then exits 1 as the apply would.
"""

from __future__ import annotations

import argparse
import sys

import attrs
import structlog

from magw.cli import UsageError
from magw.cli.nodeargs import add_netns_argument, open_node_driver, require_netns
from magw.cli.plan import check_node
from magw.cli.prefsrc import prefsrc_lines
from magw.cli.sync import sync
from magw.cli.timings import PhaseClock, TimedDriver
from magw.desired.node.classes import adopted_main
from magw.desired.node.planner import plan
from magw.drivers.netlink.capabilities import (
    HASH_POLICY_KEY,
    HASH_POLICY_L4,
    Capabilities,
    detect,
    set_hash_policy,
)
from magw.drivers.netlink.heldgroups import held_group_ids_in
from magw.model import Snapshot, Strategy
from magw.snapshot.load import load_snapshot
from magw.util.gcpause import gc_paused

log = structlog.get_logger(__name__)


DRY_RUN_HELP = "print the changes without applying them; read-only (see below)"
DRY_RUN_EPILOG = (
    "--dry-run only reads the namespace: nexthop and resilient-group support come from netlink dumps (no probe"
    " objects are created; a 'dry run: ...' line says what was inferred), the multipath hash policy is not set"
    " ('would set ...'), and the changes are printed, not applied. Links, addresses, neighbors, FDB entries,"
    " nexthops, routes, rules, nft tables and sysctls are left exactly as they were. A route whose src (the"
    " node's cni_ip) is no address of the namespace is named on a 'dry run: would fail: ...' line (the kernel"
    " would refuse it: put the cni_ip on the CNI bridge, cni0, first), and the dry run then exits 1."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(fast_exit=True)  # magw.cli.main._exit_now: no interpreter teardown after the command
    parser.add_argument(
        "--snapshot", required=True, metavar="FILE", help="the snapshot YAML (see docs/snapshot-format.md)"
    )
    parser.add_argument("--node", required=True, metavar="NAME", help="the node of the local cluster to apply")
    add_netns_argument(parser)
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    parser.add_argument("--timings", action="store_true", help="print where the time went on stderr (timings: ...)")
    parser.epilog = DRY_RUN_EPILOG


def _with_strategy(snapshot: Snapshot, caps: Capabilities) -> Snapshot:
    strategy = caps.strategy(snapshot.config.strategy)
    return attrs.evolve(snapshot, config=attrs.evolve(snapshot.config, strategy=strategy))


def run(args: argparse.Namespace) -> int:
    clock = PhaseClock()  # magw.cli.timings: phases for --timings
    snapshot = load_snapshot(args.snapshot)
    check_node(snapshot, args.node)
    clock.mark("load")
    netns = require_netns(args.netns, guard=not args.dry_run)  # a dry run only reads: any namespace will do
    caps = detect(netns, read_only=args.dry_run)
    clock.mark("detect")
    snapshot = _with_strategy(snapshot, caps)
    held = held_group_ids_in(netns)  # a worker's shared group keeps the one the kernel holds (classes.adopted_main)
    main = adopted_main(held, resilient=snapshot.config.strategy is Strategy.RESILIENT)
    try:
        desired = plan(snapshot, args.node, main_group=main)
    except (KeyError, ValueError) as exc:
        raise UsageError(f"{args.snapshot}: {exc.args[0] if exc.args else exc}") from exc
    del snapshot  # the plan holds what it needs; the rest of the snapshot need not live through the sync
    clock.mark("plan")
    if args.dry_run:
        for note in caps.notes:
            print(note if note.startswith("dry run: ") else f"dry run: {note}")
        print(f"would set {HASH_POLICY_KEY}={HASH_POLICY_L4}")
        doomed = prefsrc_lines(desired, netns)  # magw.cli.prefsrc: routes whose src the namespace lacks
        for line in doomed:
            print(line)
    else:
        doomed = []
        set_hash_policy(netns, HASH_POLICY_L4)
    with open_node_driver(netns) as driver:
        clock.mark("open")  # the hash policy sysctl, netlink sockets and the nft context
        with gc_paused():  # magw.util.gcpause: the ops, messages and lines of a sync are acyclic
            report = sync(TimedDriver(driver, clock), desired, dry_run=args.dry_run, out=sys.stdout)
        clock.mark("diff")
    if args.timings:
        clock.report()
    log.info("apply.done", node=args.node, netns=netns, changes=len(report.changes), failed=len(report.result.failed))
    return 1 if report.result.failed or doomed else 0
