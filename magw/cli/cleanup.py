"""``magw cleanup``: remove exactly what magw owns from a namespace, nothing else.

    magw cleanup [--netns NS | --allow-init-netns] [--dry-run] [--ovs-db unix:PATH]

The sync is a diff against an empty DesiredState: our links (and with them
what hangs on them), nexthop ids in our range, routes with our protocol in our
tables, rules at our priorities, and our nft table. Foreign routes, rules,
links, nexthops and nft tables are never observed, so never touched. The
multipath hash policy is left as it is (we do not know what it was before).
The liveness table of failure detection (``ip magw_health``,
docs/health.md) is ours too and goes first. Without ``--netns`` it works in the
current namespace, and refuses (exit 2) when that is, or may be, the host's
initial one unless ``--allow-init-netns`` is given (``nodeargs``); ``--dry-run``
only reads, so it is not refused.

With ``--ovs-db`` (a node of ``cni: ovn``, docs/ovn-node.md) it also removes what
the route agent made in Open vSwitch: ``br-submariner`` and its ports when the
bridge is ours, our ``ovn-k8s-sub0`` port elsewhere, and the
``submariner_gateway:br-submariner`` entry of ``ovn-bridge-mappings`` when we
added it. Foreign bridges, ports and mapping entries stay.
"""

from __future__ import annotations

import argparse
import sys

import structlog

from magw.cli.nodeargs import add_netns_argument, open_node_driver, require_netns
from magw.cli.sync import sync
from magw.daemons.common.flags import ovsdb_remote
from magw.desired.state import DesiredState
from magw.health.liveness import TABLE as LIVENESS_TABLE
from magw.health.liveness import remove_liveness_table

log = structlog.get_logger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_netns_argument(parser)
    parser.add_argument("--dry-run", action="store_true", help="print what would be removed without removing it")
    parser.add_argument(
        "--ovs-db",
        type=ovsdb_remote,
        metavar="REMOTE",
        help="also remove the route agent's br-submariner, ovn-k8s-sub0 and bridge mapping from this Open vSwitch "
        "database (unix:PATH), leaving everything not ours",
    )


def run(args: argparse.Namespace) -> int:
    netns = require_netns(args.netns, guard=not args.dry_run)  # a dry run only reads: any namespace will do
    if remove_liveness_table(netns, dry_run=args.dry_run):
        print(f"{'would delete' if args.dry_run else 'delete'} nft table ip {LIVENESS_TABLE} (liveness lease)")
    ovs_failed = args.ovs_db is not None and not _cleanup_ovs(args.ovs_db, dry_run=args.dry_run)
    with open_node_driver(netns) as driver:
        report = sync(driver, DesiredState(), dry_run=args.dry_run, out=sys.stdout)
    log.info("cleanup.done", netns=netns, changes=len(report.changes), failed=len(report.result.failed))
    return 1 if report.result.failed or ovs_failed else 0


def _cleanup_ovs(remote: str, *, dry_run: bool) -> bool:
    """Remove the OVN mode's Open vSwitch objects (first: ovn-k8s-sub0 carries routes the sync below would
    otherwise delete one by one). False, said in one line, when ovs-vsctl failed."""
    from magw.drivers.ovs.bridge import OvsBridge, OvsError

    try:
        removed = OvsBridge(remote).cleanup(dry_run=dry_run)
    except OvsError as exc:
        print(f"ovs: {exc}", file=sys.stderr)
        return False
    for what in removed:
        print(f"{'would remove' if dry_run else 'remove'} ovs {what}")
    if not removed:
        print("ovs: nothing of magw's")
    return True
