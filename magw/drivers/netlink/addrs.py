"""Addresses, static neighbors and VXLAN FDB entries on the links we own.

Everything here hangs on one of our links (``constants.OWNED_LINKS``): every IPv4
address on them (and on ``ovn-k8s-sub0``, ``OWNED_ADDRESS_DEVICES``), every
``nud permanent`` IPv4 neighbor, every ``self permanent`` FDB entry with a
destination. Create and replace are the same request (NLM_F_CREATE|NLM_F_REPLACE),
so both are idempotent. Deleting something that is
missing, or whose link is missing, is success.

VXLAN FDB semantics (kernel drivers/net/vxlan, checked on 6.18):
- ``bridge fdb append`` (NLM_F_APPEND) adds a destination only to an all-zero or
  multicast MAC; on an existing unicast MAC it silently changes nothing. So a
  unicast entry is written with ``replace``, which swaps its one destination.
- A destination has a UDP port of its own (``port P``, NDA_PORT), set by the same ``replace``; without
  one it is the device's port. A dump carries NDA_PORT only when the port is neither 0 nor the
  device's, so both read back as port None.
- ``bridge fdb del`` naming a destination removes that destination only; without
  one it removes the whole entry. We name none: one message removes the entry (``FdbIO.delete``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from ipaddress import IPv4Interface
from typing import Any

import attrs

from magw.desired.state import Address, Fdb, Neighbor
from magw.drivers.netlink.constants import OWNED_ADDRESS_DEVICES, OWNED_LINKS
from magw.drivers.netlink.linktable import LinkTable
from magw.drivers.netlink.neighdump import dump_fdb, dump_neighbors
from magw.drivers.netlink.rawsock import RawNetlink
from magw.drivers.netlink.session import OpError, error_code

_EPERM = 1
_ENOENT = 2
_ENODEV = 19
_EADDRNOTAVAIL = 99
_NUD_PERMANENT = 0x80
_NTF_SELF = 0x02


def _require_owned(dev: str, what: str, owned: frozenset[str] = OWNED_LINKS) -> None:
    if dev not in owned:
        raise OpError(_EPERM, f"{what} on {dev}: device is not one of ours")


def _owned_index(table: LinkTable, dev: str) -> int | None:
    """The ifindex of our link ``dev``, None when it does not exist (a delete then has nothing to do)."""
    return table.index(dev) if table.has(dev) else None


def _ignore(exc: BaseException, *codes: int) -> None:
    if error_code(exc) not in codes:
        raise exc


@attrs.define
class AddressIO:
    """IPv4 addresses of our links."""

    ipr: Any
    table: LinkTable

    def observe(self) -> list[Address]:
        out = []
        for msg in self.ipr.get_addr(family=socket.AF_INET):
            dev = self.table.name(msg["index"])
            if dev in OWNED_ADDRESS_DEVICES:
                ip = msg.get("IFA_LOCAL") or msg.get("IFA_ADDRESS")
                out.append(Address(dev=dev, address=IPv4Interface(f"{ip}/{msg['prefixlen']}")))
        return out

    def ensure(self, addr: Address) -> None:
        _require_owned(addr.dev, "address", OWNED_ADDRESS_DEVICES)
        index = self.table.index(addr.dev)
        self.ipr.addr("replace", index=index, address=str(addr.address.ip), prefixlen=addr.address.network.prefixlen)

    def delete(self, addr: Address) -> None:
        _require_owned(addr.dev, "address", OWNED_ADDRESS_DEVICES)
        index = _owned_index(self.table, addr.dev)
        if index is None:
            return
        try:
            self.ipr.addr("del", index=index, address=str(addr.address.ip), prefixlen=addr.address.network.prefixlen)
        except Exception as exc:
            _ignore(exc, _EADDRNOTAVAIL, _ENODEV)


def _owned_devices(table: LinkTable) -> list[tuple[str, int]]:
    return [(dev, table.index(dev)) for dev in sorted(OWNED_LINKS) if table.has(dev)]


@attrs.define
class NeighborIO:
    """Static (``nud permanent``) IPv4 neighbors on our links.

    Observed with a raw RTM_GETNEIGH dump per owned device (``neighdump``): pyroute2's dump cost about
    0.26 ms per entry, 1.3 s for a 5,000-node cluster's gateway (docs/performance.md).
    """

    ipr: Any
    table: LinkTable
    sock: RawNetlink

    def observe(self) -> list[Neighbor]:
        return [
            Neighbor(dev=dev, ip=ip, mac=mac)
            for dev, index in _owned_devices(self.table)
            for ip, mac in dump_neighbors(self.sock, index)
        ]

    def ensure(self, neigh: Neighbor) -> None:
        _require_owned(neigh.dev, "neighbor")
        index = self.table.index(neigh.dev)
        self.ipr.neigh("replace", ifindex=index, dst=str(neigh.ip), lladdr=neigh.mac, state=_NUD_PERMANENT)

    def delete(self, neigh: Neighbor) -> None:
        _require_owned(neigh.dev, "neighbor")
        index = _owned_index(self.table, neigh.dev)
        if index is None:
            return
        try:
            self.ipr.neigh("del", ifindex=index, dst=str(neigh.ip))
        except Exception as exc:
            _ignore(exc, _ENOENT, _ENODEV)


@attrs.define
class FdbIO:
    """Unicast VXLAN FDB entries (``MAC dst IP [port P] self permanent``) on our links (observed like NeighborIO).

    The driver writes them in batches (``neighfast.NeighFdbIO``); ``ensure`` and ``delete`` here are the same
    requests through pyroute2.
    """

    ipr: Any
    table: LinkTable
    sock: RawNetlink

    def _entries(self) -> Iterator[Fdb]:
        """Every permanent entry with an IPv4 destination on our links, one per destination."""
        for dev, index in _owned_devices(self.table):
            for mac, dst, port in dump_fdb(self.sock, index):
                yield Fdb(dev=dev, mac=mac, dst=dst, port=port)

    def observe(self) -> list[Fdb]:
        """One entry per (dev, MAC): an all-zero MAC with several destinations shows its lowest one."""
        first: dict[tuple[str, str], Fdb] = {}
        for entry in sorted(self._entries(), key=lambda f: (f.key, f.dst, f.port or 0)):
            first.setdefault(entry.key, entry)
        return list(first.values())

    def ensure(self, fdb: Fdb) -> None:
        _require_owned(fdb.dev, "fdb entry")
        index = self.table.index(fdb.dev)
        port: dict[str, int] = {} if fdb.port is None else {"port": fdb.port}  # pyroute2 packs NDA_PORT big-endian
        self.ipr.fdb(
            "replace", ifindex=index, lladdr=fdb.mac, dst=str(fdb.dst), state=_NUD_PERMANENT, flags=_NTF_SELF, **port
        )

    def delete(self, fdb: Fdb) -> None:
        """Remove the entry with every destination it has, in one message (the observed dst may be stale).

        A VXLAN FDB delete without NDA_DST destroys the whole entry (``__vxlan_fdb_delete``), so a
        node leaving costs one message, not a dump of all N entries to find its destinations.
        """
        _require_owned(fdb.dev, "fdb entry")
        index = _owned_index(self.table, fdb.dev)
        if index is None:
            return
        try:
            self.ipr.fdb("del", ifindex=index, lladdr=fdb.mac, flags=_NTF_SELF)
        except Exception as exc:
            _ignore(exc, _ENOENT, _ENODEV)
