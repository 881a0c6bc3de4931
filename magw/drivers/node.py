"""One node's driver: a netlink driver and an nft driver behind the Driver protocol.

Either half may be real or fake (``NetlinkDriver``/``FakeNetlink``,
``NftDriver``/``FakeNft``). ``observe()`` is the netlink state with our nft table
in its ``nft`` field; ``apply()`` carries out the netlink ops first, then the nft
changes, and returns one merged ApplyResult. A failure in one half never stops
the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs
import structlog

from magw.desired.nft import NftTable
from magw.desired.state import DesiredState
from magw.reconcile.changeset import ChangeSet, NftChange
from magw.reconcile.driver import ApplyResult

log = structlog.get_logger(__name__)


class NetlinkHalf(Protocol):
    def observe(self) -> DesiredState: ...

    def apply(self, changes: ChangeSet) -> ApplyResult: ...


class NftHalf(Protocol):
    def observe(self) -> NftTable | None: ...

    def apply(self, changes: Sequence[NftChange]) -> ApplyResult: ...


def merge_results(*results: ApplyResult) -> ApplyResult:
    """One ApplyResult holding every applied op and every failure, in order."""
    return ApplyResult(
        applied=tuple(op for r in results for op in r.applied),
        failed=tuple(f for r in results for f in r.failed),
    )


@attrs.define
class NodeDriver:
    """The Driver of one node: netlink objects plus our nftables table."""

    netlink: NetlinkHalf
    nft: NftHalf

    def observe(self) -> DesiredState:
        # nft first: libnftables' listing of a 100k-element set peaks at about 150 MB of its own, better
        # reached before the 100k observed routes exist than after (issue 10: peak RSS of a re-run).
        nft = self.nft.observe()
        return attrs.evolve(self.netlink.observe(), nft=nft)

    def apply(self, changes: ChangeSet) -> ApplyResult:
        ops = self.netlink.apply(ChangeSet(ops=changes.ops)) if changes.ops else ApplyResult()
        nft = self.nft.apply(changes.nft) if changes.nft else ApplyResult()
        result = merge_results(ops, nft)
        log.debug("node.apply_done", applied=len(result.applied), failed=len(result.failed))
        return result
