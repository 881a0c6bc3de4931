"""One node's driver: a netlink driver and an nft driver behind the Driver protocol.

Either half may be real or fake (``NetlinkDriver``/``FakeNetlink``,
``NftDriver``/``FakeNft``). ``observe()`` is the netlink state with our nft table
in its ``nft`` field; ``apply()`` carries out the nft changes in a thread while
the netlink ops are sent, and returns one merged ApplyResult (netlink results
first). A failure in one half never stops the other. ``begin_apply()`` starts
the nft thread (when there are nft changes) and leaves the netlink half to the
``finish`` it returns (``magw.reconcile.driver.StagedDriver``).

Why a thread (docs/performance.md): nftables and rtnetlink are independent kernel
subsystems, and our rules name interfaces (``iifname``/``oifname``), never by
index, so neither half waits for the other's objects. libnftables parses its
transaction through ctypes, which releases the GIL: at 100k routes its 1.0-1.8 s
overlaps the netlink messages instead of following them. Both halves always run
to their end; an exception from either is raised only once both are done.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import attrs
import structlog

from magw.desired.nft.values import NftTable
from magw.desired.state import DesiredState
from magw.reconcile.changeset import ChangeSet, NftChange
from magw.reconcile.driver import ApplyResult, merge_results

log = structlog.get_logger(__name__)

T = TypeVar("T")


class NetlinkHalf(Protocol):
    def observe(self) -> DesiredState: ...

    def apply(self, changes: ChangeSet) -> ApplyResult: ...


class NftHalf(Protocol):
    tables: tuple[tuple[str, str], ...]  # the (family, name) tables it owns, ``ip magw`` (DesiredState.nft) first

    def observe_all(self) -> tuple[NftTable, ...]: ...

    def apply(self, changes: Sequence[NftChange]) -> ApplyResult: ...


@attrs.define
class NodeDriver:
    """The Driver of one node: netlink objects plus our nftables table."""

    netlink: NetlinkHalf
    nft: NftHalf

    def observe(self) -> DesiredState:
        # nft first: libnftables' listing of a 100k-element set peaks at about 150 MB of its own, better
        # reached before the 100k observed routes exist than after (docs/performance.md: peak RSS of a re-run).
        main_key = self.nft.tables[0]
        tables = self.nft.observe_all()
        main = next((t for t in tables if (t.family, t.name) == main_key), None)
        extra = tuple(t for t in tables if (t.family, t.name) != main_key)
        return attrs.evolve(self.netlink.observe(), nft=main, extra_nft=extra)

    def apply(self, changes: ChangeSet) -> ApplyResult:
        """The nft changes in a thread while this thread sends the netlink ops, when there are both."""
        if not (changes.ops and changes.nft):
            return self._sequential(changes)
        return self.begin_apply(changes)()

    def begin_apply(self, changes: ChangeSet) -> Callable[[], ApplyResult]:
        """Start the nft changes in a thread now; ``finish()`` sends the netlink ops in this thread, waits for the
        nft thread and returns the merged result (``StagedDriver``).

        ``magw apply`` starts the nft changes alone, as soon as they are known, then diffs and prints the netlink
        ops (``magw.cli.sync``): at 100k routes libnftables' 1.0-1.8 s on the set is as long as all the netlink
        work, and it then overlaps the netlink diff as well as the printing and the messages (docs/performance.md).
        """
        if not changes.nft:
            return lambda: self._sequential(changes)
        join_nft = _started(lambda: self.nft.apply(changes.nft))

        def finish() -> ApplyResult:
            try:
                ops = self.netlink.apply(ChangeSet(ops=changes.ops)) if changes.ops else ApplyResult()
            finally:
                nft = join_nft()  # waits even when netlink raised: never leave a transaction running
            return self._merged(ops, nft)

        return finish

    def _sequential(self, changes: ChangeSet) -> ApplyResult:
        ops = self.netlink.apply(ChangeSet(ops=changes.ops)) if changes.ops else ApplyResult()
        nft = self.nft.apply(changes.nft) if changes.nft else ApplyResult()
        return self._merged(ops, nft)

    @staticmethod
    def _merged(ops: ApplyResult, nft: ApplyResult) -> ApplyResult:
        result = merge_results(ops, nft)
        log.debug("node.apply_done", applied=len(result.applied), failed=len(result.failed))
        return result


def _started(fn: Callable[[], T]) -> Callable[[], T]:
    """Start ``fn()`` in a thread (with this thread's contextvars); the returned join gives its result or raises."""
    outcome: list[T] = []
    error: list[BaseException] = []
    context = contextvars.copy_context()

    def body() -> None:
        try:
            outcome.append(context.run(fn))
        except BaseException as exc:  # handed to the joining thread, which raises it
            error.append(exc)

    thread = threading.Thread(target=body, name="magw-nft-apply", daemon=True)
    thread.start()

    def join() -> T:
        thread.join()
        if error:
            raise error[0]
        return outcome[0]

    return join
