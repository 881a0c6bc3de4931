"""The liveness set: ``table ip magw_health``, where the kernel answers probes only for the ids in its set.

::

    table ip magw_health {
        set lease { typeof icmp id; flags timeout; }
        chain input {
            type filter hook input priority -10; policy accept;
            icmp type echo-request ip daddr { 240.0.0.0/8, 241.0.0.0/8 } icmp id != @lease drop
        }
    }

The route agent of a gateway node renews the liveness set's elements (see
``magw.health.echoids``) every ``refresh`` seconds, each with a ``timeout``:
one small transaction per refresh, whatever the number of probing workers.
When the daemon dies the elements expire and the node stops answering,
although its kernel is alive. The table is separate from ``ip magw``, which the
reconciler replaces as a whole on every sync (that would reset the timeouts).

nft 1.0.6 quirk: ``add element`` of an element that exists does not renew its
timeout (kernel 6.18: the element expired 1 s after the first add although it
was re-added at 0.5 s). A refresh is therefore ``flush set`` + ``add element``
in one transaction: atomic, so no probe ever sees an empty set in between.

Threads. libnftables is synchronous: a refresh is a netlink round trip, a
re-install a whole table. The health monitor's loop also reads probe replies
against 20 ms deadlines, so ``LivenessKeeper`` runs every call of its
``LivenessTable`` in one dedicated worker thread, always the same one; the table
(and its libnftables context, which stays in the namespace it was made in) is
made there on first use and only ever touched from there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import structlog

from magw.drivers.nft.libnft import Nft, NftError
from magw.health.params import LivenessParams
from magw.model.vtep import INTER_OCTET, INTRA_OCTET

log = structlog.get_logger(__name__)

FAMILY = "ip"
TABLE = "magw_health"
SET = "lease"
CHAIN = "input"
PRIORITY = -10
VTEP_RANGES = (f"{INTRA_OCTET}.0.0.0/8", f"{INTER_OCTET}.0.0.0/8")


def _millis(seconds: float) -> str:
    return f"{max(round(seconds * 1000), 1)}ms"


def elements_text(ids: Iterable[int], timeout: float) -> str:
    """``add element`` for ``ids`` (nothing when there are none)."""
    items = sorted(set(ids))
    if not items:
        return ""
    elems = ", ".join(f"{i} timeout {_millis(timeout)}" for i in items)
    return f"add element {FAMILY} {TABLE} {SET} {{ {elems} }}\n"


def table_text(ids: Iterable[int], timeout: float) -> str:
    """Create (or re-create from scratch) the table with ``ids`` in the liveness set: one transaction."""
    # Declaring and deleting first makes "create from scratch" work whether the table exists or not.
    return (
        f"add table {FAMILY} {TABLE}\n"
        f"delete table {FAMILY} {TABLE}\n"
        f"table {FAMILY} {TABLE} {{\n"
        f"  set {SET} {{\n    typeof icmp id\n    flags timeout\n  }}\n"
        f"  chain {CHAIN} {{\n"
        f"    type filter hook input priority {PRIORITY}; policy accept;\n"
        f"    icmp type echo-request ip daddr {{ {', '.join(VTEP_RANGES)} }} icmp id != @{SET} drop\n"
        f"  }}\n"
        f"}}\n" + elements_text(ids, timeout)
    )


def refresh_text(ids: Iterable[int], timeout: float) -> str:
    """Renew the liveness set: exactly ``ids``, each for ``timeout`` seconds from now."""
    return f"flush set {FAMILY} {TABLE} {SET}\n" + elements_text(ids, timeout)


class LivenessTable:
    """Our liveness table in ``netns`` (None: the current namespace)."""

    def __init__(self, params: LivenessParams, *, netns: str | None = None) -> None:
        self.params = params
        self.netns = netns
        self._nft = Nft(netns)
        self._installed = False

    def close(self) -> None:
        self._nft.close()

    def install(self, ids: Iterable[int]) -> None:
        """Create the table from scratch with ``ids`` in the liveness set."""
        self._nft.run(table_text(ids, self.params.timeout))
        self._installed = True

    def refresh(self, ids: Iterable[int]) -> None:
        """Renew exactly ``ids`` in the liveness set; re-creates the table if it went missing."""
        if not self._installed:
            self.install(ids)
            return
        try:
            self._nft.run(refresh_text(ids, self.params.timeout))
        except NftError as exc:  # the table was removed under us (magw cleanup, nft flush ruleset): put it back
            log.warning("health.lease_table_recreated", netns=self.netns, error=exc.message)
            self.install(ids)

    def withdraw(self) -> None:
        """Empty the liveness set now (the node stops answering at once); the table stays."""
        if self._installed:
            self.refresh(())

    def hold_for(self, ids: Iterable[int], seconds: float) -> None:
        """Renew exactly ``ids`` in the liveness set once, for ``seconds`` (a clean exit before a restart)."""
        if self._installed:
            self._nft.run(refresh_text(ids, seconds))

    def adopt(self) -> bool:
        """Take over the table a previous run left (True), elements untouched: what it held before a clean
        exit keeps answering until this run is ready and refreshes. False: there is none."""
        if TABLE not in self._nft.table_names(FAMILY):
            return False
        self._installed = True
        return True

    def remove(self) -> bool:
        """Delete the table if it exists; True if it did."""
        self._installed = False
        if TABLE not in self._nft.table_names(FAMILY):
            return False
        self._nft.run(f"delete table {FAMILY} {TABLE}\n")
        return True


class LivenessTableLike(Protocol):
    """What ``LivenessKeeper`` needs of a liveness table (``LivenessTable``; tests pass stand-ins)."""

    def refresh(self, ids: Iterable[int]) -> None: ...

    def withdraw(self) -> None: ...

    def hold_for(self, ids: Iterable[int], seconds: float) -> None: ...

    def adopt(self) -> bool: ...

    def remove(self) -> bool: ...

    def close(self) -> None: ...


class LivenessKeeper:
    """Holds the liveness set for an asyncio caller; every call of the table runs in one worker thread (see above)."""

    def __init__(self, factory: Callable[[], LivenessTableLike], *, node: str, exit_hold: float = 0.0) -> None:
        self._factory = factory
        self._node = node
        self._exit_hold = exit_hold
        self._ids: frozenset[int] = frozenset()
        self._adopted = False  # holding a previous run's liveness set as it was, until the first ready hold
        self._table: LivenessTableLike | None = None
        self._executor: ThreadPoolExecutor | None = None

    async def hold(self, ids: frozenset[int] | None, *, provisional: bool = False) -> None:
        """Hold exactly ``ids`` in the liveness set (installing the table if needed); None: remove the table (no
        gateway role).

        ``provisional``: ``ids`` are what this run may answer before its first sync (nothing). A table a
        previous run left is then adopted as it is: after a clean exit it still holds that run's ids for
        the exit hold, and a restart must not take the node down in between (docs/health.md)."""
        await self._run(self._hold, ids, provisional)

    async def release(self) -> None:
        """A clean exit: hold the liveness set ``exit_hold`` seconds more (a restart takes it over), or with 0 empty
        it now (the node stops answering); close the table, end the worker thread."""
        if self._executor is None:
            return
        try:
            await self._run(self._release)
        finally:
            executor, self._executor = self._executor, None
            if executor is not None:
                executor.shutdown(wait=False)

    async def _run(self, fn: Callable[..., None], *args: object) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"magw-lease-{self._node}")
        await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _hold(self, ids: frozenset[int] | None, provisional: bool = False) -> None:
        try:
            if ids is not None:
                if self._table is None:
                    self._table = self._factory()
                    if provisional and self._table.adopt():
                        self._adopted = True
                        log.info("health.lease_adopted", node=self._node)
                if provisional and self._adopted:
                    return
                self._adopted = False
                self._table.refresh(ids)
                self._ids = ids
            elif self._table is not None:
                self._table.remove()
                self._table.close()
                self._table = None
        except Exception as exc:  # retried at the next refresh; if it keeps failing the elements expire
            log.error("health.lease_failed", node=self._node, error=repr(exc))

    def _release(self) -> None:
        if self._table is None:
            return
        try:
            if self._exit_hold > 0 and self._ids:
                self._table.hold_for(self._ids, self._exit_hold)
                log.info("health.lease_kept", node=self._node, seconds=self._exit_hold, ids=sorted(self._ids))
            else:
                self._table.withdraw()
        except Exception as exc:  # the namespace may be going away; the elements expire anyway
            log.warning("health.withdraw_failed", node=self._node, error=repr(exc))
        self._table.close()
        self._table = None


def remove_liveness_table(netns: str | None, *, dry_run: bool = False) -> bool:
    """For ``magw cleanup``: delete our liveness table in ``netns`` if it is there; True if it was (or would be)."""
    nft = Nft(netns)
    try:
        if TABLE not in nft.table_names(FAMILY):
            return False
        if not dry_run:
            nft.run(f"delete table {FAMILY} {TABLE}\n")
        return True
    finally:
        nft.close()
