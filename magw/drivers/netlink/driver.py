"""NetlinkDriver: the netlink half of a node's Driver, on the real kernel.

Links, addresses and rules go through pyroute2 (``links``, ``addrs``, ``rules``);
nexthops, groups and routes go through the hand-packed fast path
(``fastpath.RouteNexthopIO``); neighbors and FDB entries are observed with raw
dumps (``neighdump``) and applied in raw batches (``neighfast.NeighFdbIO``). Only what we own is
observed or touched (``constants``).

``apply`` carries out ``changes.ops`` in the ChangeSet's order. Consecutive ops
of the fast-path kinds go to the kernel as one batch (the kernel handles a
batch in order, so a group after its member nexthops works). A failing op
becomes a Failure naming the object, the errno name and the kernel's message;
the other ops go on. ``changes.nft`` is not ours (see ``magw.drivers.node``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import structlog
from pyroute2.netlink.exceptions import NetlinkError

from magw.desired.state import DesiredState, NetObject
from magw.drivers.netlink.addrs import AddressIO, FdbIO, NeighborIO
from magw.drivers.netlink.fastpath import RouteNexthopIO
from magw.drivers.netlink.links import LinkIO
from magw.drivers.netlink.linktable import LinkTable
from magw.drivers.netlink.neighfast import KINDS as NEIGH_KINDS
from magw.drivers.netlink.neighfast import NeighFdbIO
from magw.drivers.netlink.rawsock import RawNetlink
from magw.drivers.netlink.rules import RuleIO
from magw.drivers.netlink.session import OpError, describe_error, open_iproute
from magw.reconcile.changeset import ChangeSet, Op
from magw.reconcile.driver import ApplyResult, Failure

log = structlog.get_logger(__name__)

FAST_KINDS = frozenset({"nexthops", "groups", "routes"})


class _KindIO(Protocol):
    def observe(self) -> Sequence[Any]: ...

    def ensure(self, obj: Any) -> None: ...

    def delete(self, obj: Any) -> None: ...


def _path(kind: str) -> str:
    if kind in FAST_KINDS:
        return "routes"
    if kind in NEIGH_KINDS:
        return "neighbors"
    return "pyroute2"


def _runs(ops: Sequence[Op]) -> Iterator[tuple[str, list[Op]]]:
    """Split ``ops`` into maximal runs that go the same way (routes fast path, neighbor/FDB batches,
    pyroute2), keeping the order."""
    run: list[Op] = []
    path = ""
    for op in ops:
        this = _path(op.kind)
        if run and this != path:
            yield path, run
            run = []
        path = this
        run.append(op)
    if run:
        yield path, run


class NetlinkDriver:
    """Observe and change what magw owns in one network namespace (None: the current one).

    The namespace must exist: a missing one raises NoSuchNetns (it is never created).
    """

    def __init__(self, netns: str | None) -> None:
        self.netns = netns
        self._ipr = open_iproute(netns)
        try:
            self._sock = RawNetlink(netns)
        except BaseException:
            self._ipr.close()
            raise
        self._table = LinkTable(self._sock)  # one name <-> index table for the pyroute2 kinds and the fast path
        self._kinds: dict[str, _KindIO] = {
            "links": LinkIO(self._ipr, self._table, netns),
            "addresses": AddressIO(self._ipr, self._table),
            "neighbors": NeighborIO(self._ipr, self._table, self._sock),
            "fdb": FdbIO(self._ipr, self._table, self._sock),
            "rules": RuleIO(self._ipr),
        }
        self._fast = RouteNexthopIO(self._sock, self._table)
        self._neigh = NeighFdbIO(self._sock, self._table)

    def close(self) -> None:
        self._sock.close()
        self._ipr.close()

    def __enter__(self) -> NetlinkDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def observe(self) -> DesiredState:
        """Everything we own, read from the kernel (``nft`` is None: that is the nft driver's)."""
        self._table.invalidate()
        nexthops, groups, routes = self._fast.observe()
        kinds = self._kinds
        return DesiredState(
            links=kinds["links"].observe(),
            addresses=kinds["addresses"].observe(),
            neighbors=kinds["neighbors"].observe(),
            fdb=kinds["fdb"].observe(),
            nexthops=nexthops,
            groups=groups,
            routes=routes,
            rules=kinds["rules"].observe(),
        )

    def apply(self, changes: ChangeSet) -> ApplyResult:
        applied: list[Op] = []
        failed: list[Failure] = []
        self._table.invalidate()  # links may have changed since the last observe
        for path, run in _runs(changes.ops):
            if path == "routes":
                failures = self._fast.apply(run)
            elif path == "neighbors":
                failures = self._neigh.apply(run)
            else:
                failures = [f for op in run if (f := self._apply_one(op))]
            bad = {id(f.op) for f in failures}
            applied.extend(op for op in run if id(op) not in bad)
            failed.extend(failures)
        for failure in failed:
            log.warning("netlink.op_failed", netns=self.netns, failure=failure.describe())
        log.info("netlink.apply_done", netns=self.netns, ops=len(changes.ops), failed=len(failed))
        return ApplyResult(applied=tuple(applied), failed=tuple(failed))

    def _apply_one(self, op: Op) -> Failure | None:
        io = self._kinds.get(op.kind)
        try:
            if io is None:
                raise OpError(22, f"unknown kind {op.kind!r}")
            obj: NetObject = op.obj
            if op.verb == "delete":
                io.delete(obj)
            else:
                io.ensure(obj)
        except (NetlinkError, OSError, OpError, ValueError) as exc:
            return Failure(op=op, error=describe_error(exc))
        return None
