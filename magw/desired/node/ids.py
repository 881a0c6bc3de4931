"""Deterministic, stable ids for the nexthop objects and groups the planner creates.

Layout of our id range (u32), 0x60000000-0x63FFFFFF:

  0x60xxxxxx  nexthop via a 240/8 VTEP on vx-submariner   (xxxxxx = low 24 bits of the VTEP)
  0x61xxxxxx  nexthop via a 241/8 VTEP on vxlan-tunnel    (xxxxxx = low 24 bits of the VTEP)
  0x62xxxxxx  plain (mpath) group for a remote cluster    (xxxxxx = hash of the cluster id)
  0x63xxxxxx  resilient group for a remote cluster        (xxxxxx = hash of the cluster id)

On a gateway a group is keyed by remote cluster (its members are that cluster's
gateways). On a worker the remote clusters whose usable local gateways are the
same set form a class and share one group (``magw.desired.node.classes``): the
largest class takes the reserved id (xxxxxx = 0xFFFFFD, which no cluster's
hash takes), every other class the id of its first cluster. Either
way a failover or a recovery is one group replace under the same id, and routes
never change; on a worker it is one replace whatever the number of clusters.
The group type is part of the id, so a change of strategy creates new groups,
moves the routes and deletes the old groups, in an order the kernel accepts (the
kernel refuses to replace a group with one of another type).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from ipaddress import IPv4Address

NEXTHOP_ID_MIN = 0x60000000
NEXTHOP_ID_MAX = 0x63FFFFFF

_NH_VX_SUBMARINER = 0x60000000
_NH_VXLAN_TUNNEL = 0x61000000
_GROUP_MPATH = 0x62000000
_GROUP_RESILIENT = 0x63000000
_LOW24 = 0x00FFFFFF
# A worker's main class (see above). Below the top two ids, which magw.drivers.netlink.capabilities' probes
# create and delete (a nexthop at 0x63FFFFFF, a group at 0x63FFFFFE); no cluster's hash gets any of the three.
_MAIN_LOW = 0x00FFFFFD
_RESERVED_LOWS = (_MAIN_LOW, 0x00FFFFFE, 0x00FFFFFF)


def nexthop_id(vtep: IPv4Address, *, inter_cluster: bool) -> int:
    """The id of the nexthop via ``vtep`` (a 240/8 or 241/8 address)."""
    base = _NH_VXLAN_TUNNEL if inter_cluster else _NH_VX_SUBMARINER
    return base | (int(vtep) & _LOW24)


def group_ids(cluster_ids: Iterable[str], *, resilient: bool) -> dict[str, int]:
    """Group ids for remote clusters: crc32 of the id, linear probing on collision.

    Probing happens in sorted cluster-id order, so the result depends only on the
    set of cluster ids. A collision is one in 16M per pair. No cluster gets the
    main class's id (``main_group_id``) nor a capability probe's: a cluster whose
    hash is 0xFFFFFD-0xFFFFFF probes on (wrapping to 0).
    """
    base = _GROUP_RESILIENT if resilient else _GROUP_MPATH
    lows = hashed_slots(cluster_ids, count=_LOW24 + 1, reserved=_RESERVED_LOWS)
    return {cid: base | low for cid, low in lows.items()}


def main_group_id(*, resilient: bool) -> int:
    """The id of a worker's main class's group (magw.desired.node.classes)."""
    return (_GROUP_RESILIENT if resilient else _GROUP_MPATH) | _MAIN_LOW


def is_group_id(nh_id: int, *, resilient: bool) -> bool:
    """True when ``nh_id`` lies in the range of groups of that type (0x63xxxxxx resilient, 0x62xxxxxx plain)."""
    return nh_id & ~_LOW24 == (_GROUP_RESILIENT if resilient else _GROUP_MPATH)


def hashed_ids(keys: Iterable[str], *, mask: int) -> dict[str, int]:
    """A distinct small number per key: ``crc32(key) & mask``, linear probing on collision.

    Probing runs in sorted key order, so the result depends only on the set of keys.
    ``mask`` (2**n - 1) must leave room for every key.
    """
    return hashed_slots(keys, count=mask + 1)  # for a mask 2**n - 1, ``& mask`` is ``% (mask + 1)``


def hashed_slots(keys: Iterable[str], *, count: int, reserved: Iterable[int] = ()) -> dict[str, int]:
    """A distinct slot in ``0..count-1`` per key: ``crc32(key) % count``, linear probing on collision, in sorted
    key order (the result depends only on the set of keys). No key gets a ``reserved`` slot. ValueError when the
    keys do not fit."""
    unique = sorted(set(keys))
    taken: set[int] = set(reserved)
    if len(unique) + len(taken) > count:
        raise ValueError(f"{len(unique)} keys do not fit in {count - len(taken)} slots")
    out: dict[str, int] = {}
    for key in unique:
        slot = zlib.crc32(key.encode()) % count
        while slot in taken:
            slot = (slot + 1) % count
        taken.add(slot)
        out[key] = slot
    return out
