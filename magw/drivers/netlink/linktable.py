"""Interface names and indexes of a namespace, read with one RTM_GETLINK dump on a RawNetlink socket.

The model names devices, the wire numbers them. ``LinkTable`` translates both ways for the
whole NetlinkDriver: the pyroute2 kinds (addresses, neighbors, FDB entries, link changes)
and the hand-packed fast path (nexthops, routes) share ONE table, so they agree on every
name. It is read at the first lookup after ``invalidate()`` (call it whenever links may
have changed: at the start of an observe or apply, after a link change), or at once with
``refresh()``. An unknown name raises ``NoDevice``; anything else that goes wrong while
reading (a netlink error, a closed socket) is raised as itself, never as "no device".
"""

from __future__ import annotations

import errno
import socket
import struct

from magw.drivers.netlink.nlattr import NLM_F_DUMP, NLM_F_REQUEST, NLMSGHDR, attrs_of, message
from magw.drivers.netlink.rawsock import RawNetlink
from magw.drivers.netlink.session import OpError

RTM_NEWLINK = 16
RTM_GETLINK = 18
IFLA_IFNAME = 3

# struct ifinfomsg {u8 family; u8 pad; u16 type; i32 index; u32 flags; u32 change}
IFINFOMSG = struct.Struct("=BxHiII")


class NoDevice(OpError, LookupError):
    """No device of that name in the namespace: ``ENODEV: no device NAME``."""

    def __init__(self, name: str) -> None:
        super().__init__(errno.ENODEV, f"no device {name}")
        self.name = name


def link_names(sock: RawNetlink) -> dict[int, str]:
    """``{ifindex: name}`` of every link in the socket's namespace."""
    request = message(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0))
    names: dict[int, str] = {}
    for msg in sock.dump(request):
        length, kind, _flags, _seq, _pid = NLMSGHDR.unpack_from(msg, 0)
        if kind != RTM_NEWLINK:
            continue
        _family, _type, index, _iff, _change = IFINFOMSG.unpack_from(msg, NLMSGHDR.size)
        raw = attrs_of(msg, NLMSGHDR.size + IFINFOMSG.size, length).get(IFLA_IFNAME)
        if raw is not None:
            names[index] = raw.split(b"\0", 1)[0].decode()
    return names


class LinkTable:
    """Name <-> index for the socket's namespace, read lazily from the kernel."""

    def __init__(self, sock: RawNetlink) -> None:
        self._sock = sock
        self._by_index: dict[int, str] | None = None
        self._by_name: dict[str, int] = {}

    def invalidate(self) -> None:
        """Read the table again at the next lookup."""
        self._by_index = None

    def refresh(self) -> dict[int, str]:
        """Read the table from the kernel now; return ``{ifindex: name}``."""
        table = link_names(self._sock)
        self._by_index = table
        self._by_name = {name: index for index, name in table.items()}
        return table

    def _table(self) -> dict[int, str]:
        return self.refresh() if self._by_index is None else self._by_index

    def index(self, name: str) -> int:
        """The ifindex of ``name``; NoDevice (ENODEV) when there is none."""
        self._table()
        try:
            return self._by_name[name]
        except KeyError:
            raise NoDevice(name) from None

    def has(self, name: str) -> bool:
        self._table()
        return name in self._by_name

    def name(self, index: int) -> str:
        """The name of ``index``, or ``if<N>`` (as ``ip`` prints it) for a device that vanished."""
        return self._table().get(index, f"if{index}")
