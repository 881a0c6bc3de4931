"""Deterministic, stable ids for the nexthop objects and groups the planner creates.

Layout of our id range (u32), 0x60000000-0x63FFFFFF:

  0x60xxxxxx  nexthop via a 240/8 VTEP on vx-submariner   (xxxxxx = low 24 bits of the VTEP)
  0x61xxxxxx  nexthop via a 241/8 VTEP on vxlan-tunnel    (xxxxxx = low 24 bits of the VTEP)
  0x62xxxxxx  plain (mpath) group for a remote cluster    (xxxxxx = hash of the cluster id)
  0x63xxxxxx  resilient group for a remote cluster        (xxxxxx = hash of the cluster id)

A group is keyed by remote cluster, not by its member set, so a failover or a
recovery is one group replace under the same id: routes never change. The group
type is part of the id, so a change of strategy creates new groups, moves the
routes and deletes the old groups, in an order the kernel accepts (the kernel
refuses to replace a group with one of another type).
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


def nexthop_id(vtep: IPv4Address, *, inter_cluster: bool) -> int:
    """The id of the nexthop via ``vtep`` (a 240/8 or 241/8 address)."""
    base = _NH_VXLAN_TUNNEL if inter_cluster else _NH_VX_SUBMARINER
    return base | (int(vtep) & _LOW24)


def group_ids(cluster_ids: Iterable[str], *, resilient: bool) -> dict[str, int]:
    """Group ids for remote clusters: crc32 of the id, linear probing on collision.

    Probing happens in sorted cluster-id order, so the result depends only on the
    set of cluster ids. A collision is one in 16M per pair.
    """
    base = _GROUP_RESILIENT if resilient else _GROUP_MPATH
    return {cid: base | low for cid, low in hashed_ids(cluster_ids, mask=_LOW24).items()}


def hashed_ids(keys: Iterable[str], *, mask: int) -> dict[str, int]:
    """A distinct small number per key: ``crc32(key) & mask``, linear probing on collision.

    Probing runs in sorted key order, so the result depends only on the set of keys.
    ``mask`` (2**n - 1) must leave room for every key.
    """
    return hashed_slots(keys, count=mask + 1)  # for a mask 2**n - 1, ``& mask`` is ``% (mask + 1)``


def hashed_slots(keys: Iterable[str], *, count: int) -> dict[str, int]:
    """A distinct slot in ``0..count-1`` per key: ``crc32(key) % count``, linear probing on collision, in sorted
    key order (the result depends only on the set of keys). ValueError when the keys do not fit."""
    unique = sorted(set(keys))
    if len(unique) > count:
        raise ValueError(f"{len(unique)} keys do not fit in {count} slots")
    taken: set[int] = set()
    out: dict[str, int] = {}
    for key in unique:
        slot = zlib.crc32(key.encode()) % count
        while slot in taken:
            slot = (slot + 1) % count
        taken.add(slot)
        out[key] = slot
    return out
