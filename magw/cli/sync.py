"""One sync for the command line: observe, diff, print each change, apply, print failures and a summary.

Shared by ``magw apply`` (desired = the plan) and ``magw cleanup`` (desired =
nothing). Each change and each failure is one line on stdout, e.g.::

    create link vx-submariner type vxlan id 100 dstport 4800 nolearning ... up
    replace nexthop id 1627525126 group 1610747910/1610747912 type resilient ...
    replace nft table ip magw
    failed: create route 100.2.0.0/16 table 100 nhid 7 metric 100: ENOENT: nexthop not found
    2 changes applied, 1 failed

A link re-created because its VNI, port, local address or learning changed loses
what hung on it (kernel behaviour); a second pass, run at once, puts it back.
"""

from __future__ import annotations

from typing import TextIO

import attrs

from magw.desired.render import object_line
from magw.desired.state import DesiredState
from magw.reconcile.changeset import ChangeSet, NftChange, Op
from magw.reconcile.diff import diff
from magw.reconcile.driver import ApplyResult, Driver, Failure

# Passes of observe/diff/apply in one command: the second catches what a link re-creation dropped.
MAX_PASSES = 2


def object_text(op: Op) -> str:
    """The object of ``op`` on one line, in the ``ip``/``bridge`` style of ``magw plan``."""
    return object_line(op.kind, op.obj)  # no one-object DesiredState per line: 100k lines took 3.5 s


def change_text(change: Op | NftChange) -> str:
    if isinstance(change, NftChange):
        verb = "delete" if change.table is None else "replace"
        return f"{verb} nft table {change.family} {change.name}"
    return f"{change.verb} {object_text(change)}"


def failure_text(failure: Failure) -> str:
    return f"failed: {change_text(failure.op)}: {failure.error}"


def _changes(changes: ChangeSet) -> list[Op | NftChange]:
    return [*changes.ops, *changes.nft]


@attrs.frozen(kw_only=True)
class SyncReport:
    """What a sync did: the changes it found (all passes) and the merged result."""

    changes: tuple[Op | NftChange, ...]
    result: ApplyResult


def sync(driver: Driver, desired: DesiredState, *, dry_run: bool, out: TextIO) -> SyncReport:
    """Bring the node to ``desired`` (or only print what would change), printing one line per change."""
    found: list[Op | NftChange] = []
    applied: list[Op | NftChange] = []
    failed: list[Failure] = []
    for _ in range(MAX_PASSES):
        changes = diff(desired, driver.observe())
        if not changes:
            break
        for change in _changes(changes):
            print(change_text(change), file=out)
        found.extend(_changes(changes))
        if dry_run:
            break
        result = driver.apply(changes)
        applied.extend(result.applied)
        failed.extend(result.failed)
        for failure in result.failed:
            print(failure_text(failure), file=out)
        if result.failed:
            break
    report = SyncReport(changes=tuple(found), result=ApplyResult(applied=tuple(applied), failed=tuple(failed)))
    print(summary(report, dry_run=dry_run), file=out)
    return report


def summary(report: SyncReport, *, dry_run: bool) -> str:
    if not report.changes:
        return "no changes"
    if dry_run:
        return f"{len(report.changes)} changes (dry run: nothing applied)"
    return f"{len(report.result.applied)} changes applied, {len(report.result.failed)} failed"
