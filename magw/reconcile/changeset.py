"""A ChangeSet: the ordered operations that turn observed state into desired state."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Literal

import attrs

from magw.desired.nft.values import NftTable
from magw.desired.state import NetObject
from magw.reconcile.nftdelta import NftElementDelta
from magw.reconcile.nftupdate import TableUpdate

Verb = Literal["create", "replace", "delete"]

_SINGULAR = {
    "links": "link",
    "addresses": "address",
    "neighbors": "neighbor",
    "nexthops": "nexthop",
    "groups": "group",
    "routes": "route",
    "rules": "rule",
}


def key_text(key: Hashable) -> str:
    """A stable, readable form of an object key: ``100 10.2.0.0/16 100`` for a route."""
    if isinstance(key, tuple):
        return " ".join(key_text(part) for part in key)
    return str(key)


@attrs.frozen(kw_only=True)
class Op:
    """One operation on one netlink object.

    ``replace`` carries the new object; ``old`` is what was observed (for logs).
    Every operation is idempotent in the drivers: ``delete`` of a missing object
    succeeds, ``create`` of an existing identical object succeeds.
    """

    verb: Verb
    kind: str
    obj: NetObject
    old: NetObject | None = None

    def describe(self) -> str:
        """``delete route 254 10.2.0.0/16 100``: the object's key as text, not as Python reprs."""
        return f"{self.verb} {_SINGULAR.get(self.kind, self.kind)} {key_text(self.obj.key)}"


@attrs.frozen(kw_only=True)
class NftChange:
    """Make our table ``table`` (None: delete ``family``/``name``). One transaction.

    ``elements`` set: the kernel's table differs from ``table`` only in these set/map elements, and the
    transaction carries only them (never a table, chain or rule command); ``table`` is still the table
    after the change, so the known state and the retry book need not know how it was done.

    ``update`` set (and ``elements`` None): the table exists and changes in place, chains and sets kept where they
    stay the same (``magw.reconcile.nftupdate``); without it, the whole table is replaced.
    """

    family: str
    name: str
    table: NftTable | None
    elements: NftElementDelta | None = None
    update: TableUpdate | None = None

    def describe(self) -> str:
        """``replace nft table ip magw``, ``update nft table ip magw in place: flush 1 chain, 3 rules``, or
        ``nft ip magw: +3 -1 elements (gn_egress +2 -1, gn_in +1)``."""
        if self.table is None:
            return f"delete nft table {self.family} {self.name}"
        if self.update is not None and self.elements is None:
            return f"update nft table {self.family} {self.name} in place: {self.update.describe()}"
        if self.elements is None:
            return f"replace nft table {self.family} {self.name}"
        return f"nft {self.family} {self.name}: {self.elements.describe()}"


@attrs.frozen(kw_only=True)
class ChangeSet:
    """Netlink operations in a kernel-valid order, plus at most one nft table change per table."""

    ops: tuple[Op, ...] = ()
    nft: tuple[NftChange, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ops or self.nft)

    def __len__(self) -> int:
        return len(self.ops) + len(self.nft)
