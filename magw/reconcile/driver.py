"""The interface every driver (fake or real) offers to the reconciler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import attrs

from magw.desired.state import DesiredState
from magw.reconcile.changeset import ChangeSet, NftChange, Op


@attrs.frozen(kw_only=True)
class Failure:
    """One operation that failed, with the reason in words (e.g. ``ENODEV: no device vx-submariner``)."""

    op: Op | NftChange
    error: str

    def describe(self) -> str:
        what = self.op.describe()
        return f"{what}: {self.error}"


@attrs.frozen(kw_only=True)
class ApplyResult:
    """What ``apply`` did. A failure of one object never stops the others."""

    applied: tuple[Op | NftChange, ...] = ()
    failed: tuple[Failure, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed


def merge_results(*results: ApplyResult) -> ApplyResult:
    """One ApplyResult holding every applied op and every failure, in order."""
    return ApplyResult(
        applied=tuple(op for r in results for op in r.applied),
        failed=tuple(f for r in results for f in r.failed),
    )


class Driver(Protocol):
    """Observes only what we own and carries out a ChangeSet.

    Semantics every driver follows (the fakes and the kernel drivers alike; tests/kernel/test_driver_contract.py
    and tests/kernel/test_nft_contract.py run the same cases against both):

    - ``create`` and ``replace`` both mean "make this object exist with exactly this content". A create
      whose key already holds an object of ours with other content replaces it (a link's mtu, a
      neighbor's MAC, an FDB entry's destination, a rule's table, a nexthop's gateway...); a create of
      an identical object changes nothing. The diff emits ``create`` for a key it did not observe, so
      this makes an op carried out twice, or racing another writer of ours, converge instead of failing.
    - The one refusal of that rule: a route ``create`` whose key (table, dst, metric: the kernel's route
      key has no protocol) holds a route of ANOTHER protocol fails with EEXIST and leaves it alone.
      A ``replace`` names a key observed as ours; if a foreign route took that key in between, the
      kernel's NLM_F_REPLACE takes it over (the kernel has no conditional replace).
    - What the kernel cannot change in place (a VXLAN link's vni/port/local/learning) is deleted and
      created again, with the kernel's side effects on what hangs on it.
    - ``delete`` of a missing object (or of one on a missing device) succeeds.
    - An op on an object we do not own (name, table, id range, priority: ``magw.drivers.netlink
      .constants``) fails with EPERM and is never sent. A device with one of our link names is ours.
    - Each op (each ``NftChange``) stands alone: a failure becomes one ``Failure`` and the rest go on.
    """

    def observe(self) -> DesiredState: ...

    def apply(self, changes: ChangeSet) -> ApplyResult: ...


@runtime_checkable
class StagedDriver(Protocol):
    """A Driver that can start an apply and finish it later: ``begin_apply(changes)`` starts what may run in the
    background (the node driver's nft transaction) and returns ``finish``, which carries out the rest and returns
    the whole ApplyResult. ``finish`` must be called exactly once, even when the caller fails in between:
    ``driver.apply(changes)`` is ``driver.begin_apply(changes)()``."""

    def begin_apply(self, changes: ChangeSet) -> Callable[[], ApplyResult]: ...


def begin_apply(driver: Driver, changes: ChangeSet) -> Callable[[], ApplyResult]:
    """``driver.begin_apply(changes)`` when the driver has it, else a ``finish`` that is ``driver.apply(changes)``."""
    if isinstance(driver, StagedDriver):
        return driver.begin_apply(changes)
    return lambda: driver.apply(changes)
