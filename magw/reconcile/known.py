"""What the reconciler believes the kernel holds between two full syncs.

After a sync, the known state is the observed state with every applied operation
carried out on it. A partial sync diffs against it instead of observing again, so
a failover (one group replace) costs no dump of thousands of routes. Any doubt
(a failure, a link replaced, which the kernel may do as delete + create and so
drop what hung on the link) throws it away and the next sync observes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import attrs

from magw.desired.nft.plan import TABLE_FAMILY, TABLE_NAME
from magw.desired.state import KINDS, DesiredState, NetObject
from magw.reconcile.changeset import NftChange, Op

MAIN_TABLE = (TABLE_FAMILY, TABLE_NAME)  # DesiredState.nft's table; any other is one of extra_nft


def carry_out(state: DesiredState, applied: Iterable[Op | NftChange]) -> DesiredState:
    """``state`` with ``applied`` operations done, as a driver would have done them."""
    by_kind: dict[str, dict[Hashable, NetObject]] = {}
    nft = state.nft
    main = MAIN_TABLE if nft is None else (nft.family, nft.name)
    extra = {(t.family, t.name): t for t in state.extra_nft}
    for op in applied:
        if isinstance(op, NftChange):
            # the table after the change, also when only its elements were sent
            if (op.family, op.name) == main:
                nft = op.table
            elif op.table is None:
                extra.pop((op.family, op.name), None)
            else:
                extra[(op.family, op.name)] = op.table
            continue
        objs = by_kind.get(op.kind)
        if objs is None:
            objs = {o.key: o for o in state.of_kind(op.kind)}
            by_kind[op.kind] = objs
        if op.verb == "delete":
            objs.pop(op.obj.key, None)
        else:
            objs[op.obj.key] = op.obj
    changes: dict[str, Any] = {kind: tuple(objs.values()) for kind, objs in by_kind.items()}
    return attrs.evolve(state, nft=nft, extra_nft=tuple(extra.values()), **changes)


def needs_observe(applied: Iterable[Op | NftChange]) -> bool:
    """True when an applied operation may have side effects the known state does not show.

    A link replace may be done as delete + create (a VXLAN id, port or local
    address cannot change in place), which drops the addresses, neighbors, FDB
    entries, nexthops and routes that hung on it; a link delete drops them too.
    """
    return any(isinstance(op, Op) and op.kind == "links" and op.verb != "create" for op in applied)


def after_apply(
    observed: DesiredState,
    desired: DesiredState,
    applied: Iterable[Op | NftChange],
    unsettled: Iterable[Op | NftChange],
) -> DesiredState:
    """The known state after an apply: ``observed`` with ``applied`` carried out, where each kind (and nft
    table) with no operation in ``unsettled`` (failed, held back or deferred) is ``desired``'s own tuple.

    A kind with nothing unsettled holds exactly what ``desired`` holds (every difference was applied), so
    the known state may keep the planner's tuple itself: objects equal under the diff are interchangeable,
    and the planner's tuple lets the next diff skip that kind outright while the planner hands the same
    tuple back (docs/performance.md; magw.reconcile.diff, magw.desired.node.memo). Only the operations of unsettled
    kinds are carried out: carrying one route change out re-indexes 100k routes that ``desired`` already holds.
    """
    kinds: set[str] = set()
    tables: set[tuple[str, str]] = set()
    for op in unsettled:
        if isinstance(op, NftChange):
            tables.add((op.family, op.name))
        else:
            kinds.add(op.kind)
    known = carry_out(
        observed,
        [op for op in applied if ((op.family, op.name) in tables if isinstance(op, NftChange) else op.kind in kinds)],
    )
    changes: dict[str, Any] = {kind: desired.of_kind(kind) for kind in KINDS if kind not in kinds}
    nft = known.nft
    if desired.nft is not None and (desired.nft.family, desired.nft.name) not in tables:
        nft = desired.nft
    elif desired.nft is None and known.nft is not None and (known.nft.family, known.nft.name) not in tables:
        nft = None
    extra = known.extra_nft
    if not tables:
        extra = desired.extra_nft
    return attrs.evolve(known, nft=nft, extra_nft=extra, **changes)
