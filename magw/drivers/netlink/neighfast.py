"""Static neighbors and VXLAN FDB entries applied in netlink batches on the raw socket.

Shaped for speed (docs/performance.md): one pyroute2 request per neighbor or FDB entry cost about 0.5 ms, so a gateway
of a 5,000-node cluster took seconds to install its 5,000 neighbors and 5,000 FDB entries. Here every op is
packed by hand and the run goes out in large batches (``RawNetlink.transact_errors``): the kernel answers each
failure by its sequence number, so each failure still names its object, and one barrier ack per batch says the
others succeeded.

The requests are exactly those of ``magw.drivers.netlink.addrs`` (which documents the VXLAN FDB semantics):

- neighbor create/replace: RTM_NEWNEIGH, ``NLM_F_CREATE|NLM_F_REPLACE``, ``nud permanent``, dst + lladdr;
- neighbor delete: RTM_DELNEIGH with dst; missing (ENOENT) or on a missing device is success;
- FDB create/replace: AF_BRIDGE RTM_NEWNEIGH, ``NTF_SELF``, ``nud permanent``, lladdr + dst (+ ``NDA_PORT``,
  big-endian, when the entry has a port of its own), replace; without ``NDA_PORT`` the kernel gives the entry
  the device's port, so a replace that drops the port goes back to it;
- FDB delete: AF_BRIDGE RTM_DELNEIGH with lladdr and no dst: the whole entry, every destination, one message.

Ops on a device that is not ours fail without being sent (EPERM), and so does an FDB entry whose port is
not a u16 (EINVAL).
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Sequence

import structlog

from magw.desired.state import Fdb, Neighbor
from magw.drivers.netlink.constants import OWNED_LINKS
from magw.drivers.netlink.linktable import LinkTable
from magw.drivers.netlink.neighdump import AF_BRIDGE, BE16, NDA_DST, NDA_LLADDR, NDA_PORT, NDMSG, NUD_PERMANENT
from magw.drivers.netlink.nlattr import attr, message
from magw.drivers.netlink.rawsock import RawNetlink
from magw.reconcile.changeset import Op
from magw.reconcile.driver import Failure

log = structlog.get_logger(__name__)

KINDS = frozenset({"neighbors", "fdb"})
RTM_NEWNEIGH = 28
RTM_DELNEIGH = 29
NLM_F_REQUEST = 0x01
NLM_F_ACK = 0x04
NLM_F_REPLACE = 0x100
NLM_F_CREATE = 0x400
NTF_SELF = 0x02


def _mac_bytes(mac: str) -> bytes:
    return bytes(int(part, 16) for part in mac.split(":"))


def pack_neighbor(neigh: Neighbor, ifindex: int, *, delete: bool) -> bytes:
    head = NDMSG.pack(socket.AF_INET, 0, 0, ifindex, 0 if delete else NUD_PERMANENT, 0, 0)
    body = head + attr(NDA_DST, neigh.ip.packed)
    if delete:
        return message(RTM_DELNEIGH, NLM_F_REQUEST | NLM_F_ACK, body)
    body += attr(NDA_LLADDR, _mac_bytes(neigh.mac))
    return message(RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, body)


def bad_port(fdb: Fdb) -> str | None:
    """Why ``fdb``'s port cannot be sent (NDA_PORT is a u16), or None when it can."""
    if fdb.port is None or 0 <= fdb.port <= 0xFFFF:
        return None
    return f"port {fdb.port} is not 0-65535"


def pack_fdb(fdb: Fdb, ifindex: int, *, delete: bool) -> bytes:
    """The request for ``fdb``: a delete names no destination (the whole entry goes), a write carries the
    port only when the entry has one. ValueError for a port that is not a u16 (``bad_port``)."""
    head = NDMSG.pack(AF_BRIDGE, 0, 0, ifindex, 0 if delete else NUD_PERMANENT, NTF_SELF, 0)
    body = head + attr(NDA_LLADDR, _mac_bytes(fdb.mac))
    if delete:
        return message(RTM_DELNEIGH, NLM_F_REQUEST | NLM_F_ACK, body)
    body += attr(NDA_DST, fdb.dst.packed)
    if fdb.port is not None:
        if (why := bad_port(fdb)) is not None:
            raise ValueError(f"fdb {fdb.mac} dev {fdb.dev}: {why}")
        body += attr(NDA_PORT, BE16.pack(fdb.port))
    return message(RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, body)


def describe(op: Op) -> str:
    obj = op.obj
    if isinstance(obj, Neighbor):
        return f"neighbor {obj.ip} lladdr {obj.mac} dev {obj.dev}"
    if isinstance(obj, Fdb):
        port = "" if obj.port is None else f" port {obj.port}"
        return f"fdb {obj.mac} dst {obj.dst}{port} dev {obj.dev}"
    return f"{type(obj).__name__} {obj.key}"


def _failure(op: Op, err: int, text: str) -> Failure:
    name = errno.errorcode.get(err, f"errno {err}")
    return Failure(op=op, error=f"{name}: {text}: {describe(op)}")


class NeighFdbIO:
    """``apply(ops)`` for runs of ``neighbors`` and ``fdb`` ops, in batches."""

    def __init__(self, sock: RawNetlink, links: LinkTable) -> None:
        self._sock = sock
        self._links = links

    def apply(self, ops: Sequence[Op]) -> list[Failure]:
        started = time.perf_counter()
        failures: dict[int, Failure] = {}
        sent: list[int] = []
        msgs: list[bytes] = []
        for i, op in enumerate(ops):
            if op.kind not in KINDS:
                raise ValueError(f"op.kind: NeighFdbIO handles neighbors and fdb, got {op.kind!r}")
            dev: str = op.obj.dev  # type: ignore[union-attr]
            if dev not in OWNED_LINKS:
                failures[i] = _failure(op, errno.EPERM, f"device {dev} is not one of ours")
                continue
            delete = op.verb == "delete"
            if not self._links.has(dev):
                if not delete:  # deleting from a missing device has nothing to do
                    failures[i] = _failure(op, errno.ENODEV, f"no device {dev}")
                continue
            index = self._links.index(dev)
            obj = op.obj
            if isinstance(obj, Fdb) and not delete and (why := bad_port(obj)) is not None:
                failures[i] = _failure(op, errno.EINVAL, why)
                continue
            msgs.append(
                pack_neighbor(obj, index, delete=delete)
                if isinstance(obj, Neighbor)
                else pack_fdb(obj, index, delete=delete)  # type: ignore[arg-type]
            )
            sent.append(i)
        for i, ack in zip(sent, self._sock.transact_errors(msgs), strict=True):
            op = ops[i]
            if ack.errno == 0 or (op.verb == "delete" and ack.errno in (errno.ENOENT, errno.ENODEV)):
                continue
            text = "kernel error" + (f" (kernel: {ack.message})" if ack.message else "")
            failures[i] = _failure(op, ack.errno, text)
        log.info(
            "netlink.neighfast.apply_done",
            ops=len(ops),
            failed=len(failures),
            took_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return [failures[i] for i in sorted(failures)]
