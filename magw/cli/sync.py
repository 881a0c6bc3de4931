"""One sync for the command line: observe, diff, print each change, apply, print failures and a summary.

Shared by ``magw apply`` (desired = the plan) and ``magw cleanup`` (desired =
nothing). Each change and each failure is one line on stdout, e.g.::

    create link vx-submariner type vxlan id 100 dstport 4800 nolearning ... up
    replace nexthop id 1627525126 group 1610747910/1610747912 type resilient ...
    replace nft table ip magw
    failed: create route 100.2.0.0/16 table 100 nhid 7 metric 100: ENOENT: nexthop not found
    2 changes applied, 1 failed

A link re-created because its VNI, port, local address or learning changed loses
what hung on it (kernel behaviour); the diff re-emits what it knows depends on it, and
a second pass, run at once, puts back anything else. That second observe and diff run
only when the first pass re-created something (deleted and created the same object):
at 100k routes they cost as much as the first apply's observe and diff together
(docs/performance.md), for a pass that finds nothing after an ordinary sync.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TextIO

import attrs

from magw.desired.render import RouteLines, object_line
from magw.desired.state import DesiredState, Route
from magw.reconcile.changeset import ChangeSet, NftChange, Op
from magw.reconcile.diff import diff, diff_nft, diff_ops
from magw.reconcile.driver import ApplyResult, Driver, Failure, begin_apply, merge_results

# Passes of observe/diff/apply in one command: the second catches what a re-creation dropped.
MAX_PASSES = 2


def object_text(op: Op) -> str:
    """The object of ``op`` on one line, in the ``ip``/``bridge`` style of ``magw plan``."""
    return object_line(op.kind, op.obj)  # no one-object DesiredState per line: 100k lines took 3.5 s


def change_text(change: Op | NftChange) -> str:
    if isinstance(change, NftChange):
        return change.describe()
    return f"{change.verb} {object_text(change)}"


def change_lines(changes: Iterable[Op | NftChange]) -> Iterator[str]:
    """``change_text`` of each change; the routes' lines through one ``RouteLines`` (docs/performance.md: 100k lines
    at an initial sync)."""
    route_line = RouteLines()
    for change in changes:
        if isinstance(change, Op) and isinstance(change.obj, Route):
            yield route_line(change.obj, change.verb)
        else:
            yield change_text(change)


def failure_text(failure: Failure) -> str:
    return f"failed: {change_text(failure.op)}: {failure.error}"


def _changes(changes: ChangeSet) -> list[Op | NftChange]:
    return [*changes.ops, *changes.nft]


_ID_SPACE = {"groups": "nexthops"}  # one id space: a nexthop replaced by a group with its id is a re-creation


def recreated(applied: Iterable[Op | NftChange]) -> bool:
    """True when ``applied`` deleted and created the same object: the kernel may have dropped its dependents."""
    ops = [op for op in applied if isinstance(op, Op)]
    deleted = {(_ID_SPACE.get(op.kind, op.kind), op.obj.key) for op in ops if op.verb == "delete"}
    if not deleted:
        return False  # the usual case, and no key computed for 100k creates
    return any((_ID_SPACE.get(op.kind, op.kind), op.obj.key) in deleted for op in ops if op.verb == "create")


LINES_PER_WRITE = 8192


def _write_lines(lines: Iterable[str], out: TextIO) -> None:
    """The lines joined, ``LINES_PER_WRITE`` per write: 100k ``print`` calls were a second of a 100k-route apply,
    and all 100k lines joined at once were about 10 MB more at the peak, while libnftables holds its own
    ~135 MB for the set in the nft thread (docs/performance.md: peak RSS)."""
    it = iter(lines)
    while chunk := list(islice(it, LINES_PER_WRITE)):
        out.write("\n".join(chunk) + "\n")


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
        observed = driver.observe()
        if dry_run:
            pending = _changes(diff(desired, observed))
            _write_lines(change_lines(pending), out)
            found.extend(pending)
            break
        result, pending = _apply_pass(driver, desired, observed, out)
        if not pending:
            break
        found.extend(pending)
        del pending  # the ChangeSet's tuples go; ``found`` keeps the ops themselves
        applied.extend(result.applied)
        failed.extend(result.failed)
        _write_lines(map(failure_text, result.failed), out)
        if result.failed or not recreated(result.applied):
            break
    report = SyncReport(changes=tuple(found), result=ApplyResult(applied=tuple(applied), failed=tuple(failed)))
    print(summary(report, dry_run=dry_run), file=out)
    return report


def _apply_pass(
    driver: Driver, desired: DesiredState, observed: DesiredState, out: TextIO
) -> tuple[ApplyResult, list[Op | NftChange]]:
    """Diff, apply and print one pass; (the merged result, the changes found: none when nothing differs).

    Shaped for speed (docs/performance.md): the nft changes are diffed first and started at once (a StagedDriver's nft
    thread: libnftables' 1.0-1.8 s on a 100k-element set, CPU shared, is as long as all the netlink work), then
    the netlink ops are diffed and their lines printed, and only then sent. Every apply started is always
    finished, even when diffing or printing fails: nothing is left half-applied or running.
    """
    nft = diff_nft(desired, observed)
    finish_nft = begin_apply(driver, ChangeSet(nft=nft)) if nft else ApplyResult
    try:
        ops = diff_ops(desired, observed)
        finish_ops = begin_apply(driver, ChangeSet(ops=ops)) if ops else ApplyResult
        try:
            _write_lines(change_lines(ops), out)
            _write_lines(change_lines(nft), out)
        finally:
            result_ops = finish_ops()
    finally:
        result_nft = finish_nft()
    return merge_results(result_ops, result_nft), [*ops, *nft]


def summary(report: SyncReport, *, dry_run: bool) -> str:
    if not report.changes:
        return "no changes"
    if dry_run:
        return f"{len(report.changes)} changes (dry run: nothing applied)"
    return f"{len(report.result.applied)} changes applied, {len(report.result.failed)} failed"
