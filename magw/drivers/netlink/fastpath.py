"""Nexthops, nexthop groups and routes: observe what we own and apply ops, in big netlink batches.

``RouteNexthopIO`` is what the NetlinkDriver calls for the kinds ``nexthops``, ``groups``
and ``routes``:

* ``observe()`` -> ``(nexthops, groups, routes)`` of ours, each sorted by key: one
  RTM_GETNEXTHOP dump (ids in our range) and one IPv4 route dump (our protocol, our tables).
* ``apply(ops)`` -> ``list[Failure]``: every op is packed, then all are sent in order in
  large batches. The kernel handles them in order, so a group created after its members in
  the same ``apply`` works. A failing op becomes one Failure naming the object; the others
  still apply. Deleting a missing object (ENOENT/ESRCH) is success. The kernel answers only
  the failures and one barrier per batch (``RawNetlink.transact_errors``); a result it could not
  report is a failure ("result unknown"), never a success.

Ops that would touch what is not ours fail without being sent (EPERM): nexthop ids outside
our range, route tables outside ``OWNED_TABLES``. A route ``create`` is exclusive: if the
kernel answers EEXIST, the existing route is replaced only when it is ours (our protocol);
a foreign route with the same table/dst/metric is left alone and the op fails.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Sequence
from typing import TypeVar

import attrs
import structlog

from magw.desired.state import NetObject, Nexthop, NexthopGroup, Route
from magw.drivers.netlink.constants import OWNED_TABLES, owns_nexthop
from magw.drivers.netlink.linktable import LinkTable, NoDevice
from magw.drivers.netlink.nexthop import encode_delete, encode_dump
from magw.drivers.netlink.rawsock import Ack, NetlinkError, RawNetlink
from magw.drivers.netlink.routes import (
    FLAGS_CREATE,
    FLAGS_REPLACE,
    pack_group,
    pack_nexthop,
    pack_route,
    pack_route_delete,
    pack_route_dump,
    parse_nexthop,
    parse_route,
)
from magw.reconcile.changeset import Op
from magw.reconcile.driver import Failure
from magw.util.courtesy import courteous

log = structlog.get_logger(__name__)

CHUNK = 8192  # ops packed and sent at a time by apply

_T = TypeVar("_T")

KINDS = ("nexthops", "groups", "routes")

_MEANINGS: dict[int, str] = {
    errno.EEXIST: "already exists",
    errno.ESRCH: "route not found",
    errno.ENODEV: "device not found",
    errno.EINVAL: "invalid argument",
    errno.ENETUNREACH: "gateway unreachable: no connected route to it on that device",
    errno.EADDRNOTAVAIL: "address not available",
    errno.ENOBUFS: "acknowledgement lost (netlink receive buffer overflow)",
    errno.EBUSY: "busy",
    errno.EPERM: "not permitted",
    errno.ERANGE: "value out of range",
    errno.EOPNOTSUPP: "not supported by this kernel",
    errno.EAFNOSUPPORT: "address family not supported",
}
_ENOENT_BY_KIND = {
    "nexthops": "nexthop not found",
    "groups": "member nexthop not found",
    "routes": "nexthop/route/device not found",
}


def describe_object(obj: NetObject) -> str:
    """A short ``ip``-like name of a nexthop, group or route, for error texts."""
    if isinstance(obj, Route):
        text = f"route {obj.dst} table {obj.table} metric {obj.metric}"
        if obj.type == "unreachable":
            text = f"route unreachable {obj.dst} table {obj.table} metric {obj.metric}"
        elif obj.nhid is not None:
            text += f" nhid {obj.nhid}"
        else:
            text += "".join(f" via {nh.via} dev {nh.dev}" for nh in obj.nexthops)
        return text + (f" src {obj.src}" if obj.src is not None else "")
    if isinstance(obj, NexthopGroup):
        members = "/".join(f"{m.id},{m.weight}" for m in obj.members)
        return f"nexthop group id {obj.id} ({obj.type}) group {members}"
    if isinstance(obj, Nexthop):
        return f"nexthop id {obj.id} via {obj.via} dev {obj.dev}"
    return f"{type(obj).__name__} {obj.key}"


def describe_error(op: Op, ack: Ack) -> str:
    """The kernel's refusal of ``op``: ``"ENOENT: nexthop/route/device not found: route ... (kernel: ...)"``."""
    name = errno.errorcode.get(ack.errno, f"errno {ack.errno}")
    meaning = _ENOENT_BY_KIND[op.kind] if ack.errno == errno.ENOENT else _MEANINGS.get(ack.errno)
    text = f"{name}: {meaning or 'kernel error'}: {describe_object(op.obj)}"
    return text + (f" (kernel: {ack.message})" if ack.message else "")


def _refusal(op: Op, exc: _OpRefused) -> Failure:
    """Our own refusal of ``op`` (never sent): ``"EPERM: <reason>: <object>"``."""
    name = errno.errorcode.get(exc.errno, f"errno {exc.errno}")
    return Failure(op=op, error=f"{name}: {exc}: {describe_object(op.obj)}")


class _OpRefused(Exception):
    """An op we refuse to send: ``errno`` and the reason."""

    def __init__(self, err: int, reason: str) -> None:
        super().__init__(reason)
        self.errno = err


class RouteNexthopIO:
    """Observe and apply nexthops, groups and routes on ``sock``'s namespace.

    ``links`` translates device names for the wire (the NetlinkDriver passes the table its
    other kinds use; default: a table of our own on ``sock``). It is read again at the start
    of every observe and apply. A device it does not know fails that op only (ENODEV); an
    error while reading it (e.g. a netlink error) is raised, not reported as a missing device.
    """

    def __init__(self, sock: RawNetlink, links: LinkTable | None = None) -> None:
        self._sock = sock
        self._links = LinkTable(sock) if links is None else links
        self._ifindex = self._links.index
        self._ifname = self._links.name

    # -- observe ---------------------------------------------------------------------------

    def observe(self) -> tuple[list[Nexthop], list[NexthopGroup], list[Route]]:
        """What we own now, each list sorted by key."""
        started = time.perf_counter()
        self._links.invalidate()
        nexthops, groups = self._observe_nexthops()
        routes = self._observe_routes()
        log.debug(
            "netlink.fastpath.observe_done",
            nexthops=len(nexthops),
            groups=len(groups),
            routes=len(routes),
            took_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return nexthops, groups, routes

    def _observe_nexthops(self) -> tuple[list[Nexthop], list[NexthopGroup]]:
        try:
            replies = self._sock.dump(encode_dump())
        except NetlinkError as exc:
            if exc.errno != errno.EOPNOTSUPP:
                raise
            # Kernel < 5.3: no nexthop objects at all, so none of ours.
            log.info("netlink.fastpath.nexthops_unsupported", error=str(exc))
            return [], []
        nexthops: list[Nexthop] = []
        groups: list[NexthopGroup] = []
        for msg in courteous(replies):  # an audit's reader steps aside while the sync path works
            obj = parse_nexthop(msg, self._ifname)
            if isinstance(obj, NexthopGroup):
                groups.append(obj)
            elif obj is not None:
                nexthops.append(obj)
        return sorted(nexthops, key=lambda n: n.key), sorted(groups, key=lambda g: g.key)

    def _observe_routes(self) -> list[Route]:
        replies = courteous(self._sock.dump(pack_route_dump()))  # an audit's reader steps aside while the sync works
        routes = [r for r in (parse_route(m, self._ifname) for m in replies) if r]
        return sorted(routes, key=lambda r: r.key)

    # -- apply -----------------------------------------------------------------------------

    def apply(self, ops: Sequence[Op]) -> list[Failure]:
        """Carry out ``ops`` in order; return the failures in op order (empty: all applied)."""
        for op in ops:
            if op.kind not in KINDS:
                raise ValueError(f"op.kind: RouteNexthopIO handles {', '.join(KINDS)}, got {op.kind!r}")
        started = time.perf_counter()
        self._links.invalidate()
        failures: dict[int, Failure] = {}
        adopt: list[int] = []
        # Packed and sent CHUNK ops at a time, in order (the kernel takes them in order either way): all 100k
        # messages of an initial sync at once were 12 MB more at the peak of a `magw apply` (docs/performance.md: RSS).
        for first in range(0, len(ops), CHUNK):
            sent: list[int] = []
            msgs: list[bytes] = []
            for i in range(first, min(first + CHUNK, len(ops))):
                try:
                    msgs.append(self._pack(ops[i]))
                except _OpRefused as exc:
                    failures[i] = _refusal(ops[i], exc)
                    continue
                sent.append(i)
            adopt += self._check_acks(ops, sent, self._sock.transact_errors(msgs), failures)
        if adopt:
            self._adopt(ops, adopt, failures)
        log.info(
            "netlink.fastpath.apply_done",
            ops=len(ops),
            failed=len(failures),
            adopted=len(adopt),
            took_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return [failures[i] for i in sorted(failures)]

    def _pack(self, op: Op) -> bytes:
        obj = op.obj
        try:
            if op.kind == "routes":
                return self._pack_route(op.verb, _expect(obj, Route, op.kind))
            if op.kind == "groups":
                group = _expect(obj, NexthopGroup, op.kind)
                _check_id(group.id)
                return encode_delete(group.id) if op.verb == "delete" else pack_group(group)
            nexthop = _expect(obj, Nexthop, op.kind)
            _check_id(nexthop.id)
            return encode_delete(nexthop.id) if op.verb == "delete" else pack_nexthop(nexthop, self._ifindex)
        except NoDevice as exc:
            raise _OpRefused(errno.ENODEV, f"no device {exc.name}") from None
        except ValueError as exc:
            raise _OpRefused(errno.EINVAL, str(exc)) from None

    def _pack_route(self, verb: str, route: Route) -> bytes:
        if route.table not in OWNED_TABLES:
            raise _OpRefused(errno.EPERM, f"table {route.table} is not one of magw's tables {sorted(OWNED_TABLES)}")
        if verb == "delete":
            return pack_route_delete(route)
        return pack_route(route, self._ifindex, flags=FLAGS_CREATE if verb == "create" else FLAGS_REPLACE)

    @staticmethod
    def _check_acks(ops: Sequence[Op], sent: list[int], acks: list[Ack], failures: dict[int, Failure]) -> list[int]:
        """Record failures; return the route creates that met an existing route (to adopt if ours)."""
        adopt = []
        for i, ack in zip(sent, acks, strict=True):
            op = ops[i]
            if ack.errno == 0 or (op.verb == "delete" and ack.errno in (errno.ENOENT, errno.ESRCH)):
                continue
            if op.kind == "routes" and op.verb == "create" and ack.errno == errno.EEXIST:
                adopt.append(i)
                continue
            failures[i] = Failure(op=op, error=describe_error(op, ack))
        return adopt

    def _adopt(self, ops: Sequence[Op], indexes: list[int], failures: dict[int, Failure]) -> None:
        """Route creates that hit EEXIST: replace the route if it is ours, else fail and leave it."""
        ours = {r.key for r in self._observe_routes()}
        mine = [i for i in indexes if ops[i].obj.key in ours]
        for i in indexes:
            if i not in mine:
                reason = "a foreign route (another protocol) holds this table/dst/metric, left alone"
                failures[i] = _refusal(ops[i], _OpRefused(errno.EEXIST, reason))
        msgs = []
        for i in mine:
            try:
                msgs.append(self._pack(attrs.evolve(ops[i], verb="replace")))
            except _OpRefused as exc:
                failures[i] = _refusal(ops[i], exc)
        replaced = [i for i in mine if i not in failures]
        for i, ack in zip(replaced, self._sock.transact_errors(msgs), strict=True):
            if ack.errno:
                failures[i] = Failure(op=ops[i], error=describe_error(ops[i], ack))


def _expect(obj: NetObject, cls: type[_T], kind: str) -> _T:
    if not isinstance(obj, cls):
        raise ValueError(f"op.obj: a {kind} op needs a {cls.__name__}, got {type(obj).__name__}")
    return obj


def _check_id(nh_id: int) -> None:
    if not owns_nexthop(nh_id):
        raise _OpRefused(errno.EPERM, f"id {nh_id} is outside magw's nexthop id range")
