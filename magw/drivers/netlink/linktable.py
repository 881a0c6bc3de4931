"""Interface names and indexes of a namespace, read with one RTM_GETLINK dump on a RawNetlink socket.

Routes and nexthops name devices by index on the wire and by name in the model. ``LinkTable``
translates both ways and reloads itself (at most once per ``allow_reload``) when asked for a
name it does not know, e.g. a VXLAN device created since the last load.
"""

from __future__ import annotations

import socket
import struct

from magw.drivers.netlink.nlattr import NLM_F_DUMP, NLM_F_REQUEST, NLMSGHDR, attrs_of, message
from magw.drivers.netlink.rawsock import RawNetlink

RTM_NEWLINK = 16
RTM_GETLINK = 18
IFLA_IFNAME = 3

# struct ifinfomsg {u8 family; u8 pad; u16 type; i32 index; u32 flags; u32 change}
IFINFOMSG = struct.Struct("=BxHiII")


class UnknownDevice(LookupError):
    """No device of that name (or index) in the namespace."""


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
    """Name <-> index for the socket's namespace, loaded lazily from the kernel."""

    def __init__(self, sock: RawNetlink) -> None:
        self._sock = sock
        self._by_index: dict[int, str] | None = None
        self._by_name: dict[str, int] = {}
        self._may_reload = True

    def allow_reload(self) -> None:
        """Let the next miss reload the table (call once per apply/observe)."""
        self._may_reload = True

    def reload(self) -> dict[int, str]:
        """Read the table from the kernel now."""
        table = link_names(self._sock)
        self._by_index = table
        self._by_name = {name: index for index, name in table.items()}
        self._may_reload = False
        return table

    def index(self, name: str) -> int:
        """The ifindex of ``name``; UnknownDevice when there is none (even after a reload)."""
        if name not in self._by_name and (self._by_index is None or self._may_reload):
            self.reload()
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownDevice(name) from None

    def name(self, index: int) -> str:
        """The name of ``index``, or ``ifindex<N>`` for a device that vanished."""
        table = self._by_index
        if table is None or (index not in table and self._may_reload):
            table = self.reload()
        return table.get(index, f"ifindex{index}")
