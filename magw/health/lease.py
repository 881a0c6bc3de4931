"""The liveness lease: ``table ip magw_health``, where the kernel answers probes only while we hold a lease.

::

    table ip magw_health {
        set lease { typeof icmp id; flags timeout; }
        chain input {
            type filter hook input priority -10; policy accept;
            icmp type echo-request ip daddr { 240.0.0.0/8, 241.0.0.0/8 } icmp id != @lease drop
        }
    }

The route agent of a gateway node renews the set's elements (see
``magw.health.echoids``) every ``refresh`` seconds, each with a ``timeout``:
one small transaction per refresh, whatever the number of probing workers.
When the daemon dies the elements expire and the node stops answering,
although its kernel is alive. The table is separate from ``ip magw``, which the
reconciler replaces as a whole on every sync (that would reset the timeouts).

nft 1.0.6 quirk: ``add element`` of an element that exists does not renew its
timeout (kernel 6.18: the element expired 1 s after the first add although it
was re-added at 0.5 s). A refresh is therefore ``flush set`` + ``add element``
in one transaction: atomic, so no probe ever sees an empty set in between.
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from magw.desired.vtep import INTER_OCTET, INTRA_OCTET
from magw.drivers.nft.libnft import Nft, NftError
from magw.health.params import LeaseParams

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
    """Create (or re-create from scratch) the table with ``ids`` leased: one transaction."""
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
    """Renew the lease: exactly ``ids``, each for ``timeout`` seconds from now."""
    return f"flush set {FAMILY} {TABLE} {SET}\n" + elements_text(ids, timeout)


class LeaseTable:
    """Our lease table in ``netns`` (None: the current namespace)."""

    def __init__(self, params: LeaseParams, *, netns: str | None = None) -> None:
        self.params = params
        self.netns = netns
        self._nft = Nft(netns)
        self._installed = False

    def close(self) -> None:
        self._nft.close()

    def install(self, ids: Iterable[int]) -> None:
        """Create the table from scratch with ``ids`` leased."""
        self._nft.run(table_text(ids, self.params.timeout))
        self._installed = True

    def refresh(self, ids: Iterable[int]) -> None:
        """Renew the lease of exactly ``ids``; re-creates the table if it went missing."""
        if not self._installed:
            self.install(ids)
            return
        try:
            self._nft.run(refresh_text(ids, self.params.timeout))
        except NftError as exc:  # the table was removed under us (magw cleanup, nft flush ruleset): put it back
            log.warning("health.lease_table_recreated", netns=self.netns, error=exc.message)
            self.install(ids)

    def withdraw(self) -> None:
        """Drop every lease now (the node stops answering at once); the table stays."""
        if self._installed:
            self.refresh(())

    def remove(self) -> bool:
        """Delete the table if it exists; True if it did."""
        self._installed = False
        if TABLE not in self._nft.table_names(FAMILY):
            return False
        self._nft.run(f"delete table {FAMILY} {TABLE}\n")
        return True


def remove_lease_table(netns: str | None, *, dry_run: bool = False) -> bool:
    """For ``magw cleanup``: delete our lease table in ``netns`` if it is there; True if it was (or would be)."""
    nft = Nft(netns)
    try:
        if TABLE not in nft.table_names(FAMILY):
            return False
        if not dry_run:
            nft.run(f"delete table {FAMILY} {TABLE}\n")
        return True
    finally:
        nft.close()
