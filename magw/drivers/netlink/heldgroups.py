"""The ids of magw's nexthop groups a namespace holds: what a worker's main class adopts when a daemon or
``magw apply`` starts (magw.desired.node.classes, "Adopting the kernel's group").

One RTM_GETNEXTHOP dump filtered by the kernel to groups (``NHA_GROUPS``), ids in magw's range only. A kernel
without nexthop objects (EOPNOTSUPP) holds none.
"""

from __future__ import annotations

import errno

from magw.drivers.netlink.constants import owns_nexthop
from magw.drivers.netlink.nexthop import decode_nexthop, encode_dump
from magw.drivers.netlink.rawsock import NetlinkError, RawNetlink


def held_group_ids(sock: RawNetlink) -> frozenset[int]:
    """The ids of the groups of ours the kernel holds (read through ``sock``)."""
    try:
        replies = sock.dump(encode_dump(groups_only=True))
    except NetlinkError as exc:
        if exc.errno != errno.EOPNOTSUPP:
            raise
        return frozenset()
    return frozenset(i for i in (decode_nexthop(m).id for m in replies) if owns_nexthop(i))


def held_group_ids_in(netns: str | None) -> frozenset[int]:
    """``held_group_ids`` on a socket of its own in ``netns`` (None: the caller's namespace)."""
    with RawNetlink(netns) as sock:
        return held_group_ids(sock)
