"""ICMP echo ids as a message: "is your daemon alive?" and "do you reach cluster C?". Pure.

A gateway's kernel answers an echo request to its VTEP only while the echo id
is in its liveness set (``magw.health.liveness``). The ids:

- ``ALIVE_ID`` (1): in the set while the node's route agent runs.
- ``0x8000 | h(C)``: in the set while this gateway reaches remote cluster C, where
  ``h`` is the low 15 bits of crc32(C), with linear probing (in sorted
  cluster-id order) on a collision, as ``magw.desired.node.ids`` does for group ids.
  Prober and answerer compute the ids from the same clusterset; the high bit
  keeps them apart from ``ALIVE_ID``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from magw.desired.node.ids import hashed_ids

ALIVE_ID = 1
REACH_BASE = 0x8000
_LOW15 = 0x7FFF


def reach_ids(cluster_ids: Iterable[str]) -> dict[str, int]:
    """The reach echo id of every cluster id given."""
    return {cid: REACH_BASE | low for cid, low in hashed_ids(cluster_ids, mask=_LOW15).items()}


def cluster_of(echo_id: int, ids: Mapping[str, int]) -> str | None:
    """The cluster whose reach id is ``echo_id`` (None for ``ALIVE_ID`` or an unknown id)."""
    for cid, value in ids.items():
        if value == echo_id:
            return cid
    return None
