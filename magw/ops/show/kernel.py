"""The share of a node's flows each path carries, from the node's nexthop groups as its kernel holds them. Pure.

A node sends a remote cluster's traffic through one nexthop group (routes ``nhid G``), one member per usable
gateway (``docs/planner.md``). The share of a path is the share of the group's hash space that points at it:

- a **resilient** group (the default strategy): the buckets whose ``nhid`` is the path's nexthop, over all
  buckets (``ip -j nexthop bucket show``). That is exactly the share of flow hashes the kernel sends that way;
  after a failover and a recovery the buckets come back only as they go idle, so the share says what the kernel
  does now, not what the plan asks for;
- a plain (``mpath``) group: the member's weight over the sum of the weights (hash-threshold: the same thing,
  up to rounding).

A path is named by its nexthop's gateway address, the peer's VTEP (241/8 between clusters, 240/8 inside one),
which is the address the health probes use. A path whose address is in no group gets no share (None): one
standalone nexthop, or none at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

Doc = Mapping[str, Any]


def _members(group: Doc) -> dict[int, int]:
    """A group's member nexthop id -> weight (default 1)."""
    return {int(m["id"]): int(m.get("weight", 1)) for m in group.get("group") or () if "id" in m}


def group_shares(nexthops: Iterable[Doc], buckets: Iterable[Doc]) -> dict[int, dict[str, float]]:
    """Group id -> {member's gateway address: its share}: buckets for a resilient group that has them, weights
    otherwise. Members without a gateway address (device nexthops) are left out."""
    nhs = list(nexthops)
    via = {int(nh["id"]): str(nh["gateway"]) for nh in nhs if "id" in nh and nh.get("gateway")}
    counted: dict[int, Counter[int]] = {}
    for b in buckets:
        bucket = b.get("bucket") or {}
        if "id" in b and "nhid" in bucket:
            counted.setdefault(int(b["id"]), Counter())[int(bucket["nhid"])] += 1
    out: dict[int, dict[str, float]] = {}
    for nh in nhs:
        if not nh.get("group") or "id" not in nh:
            continue
        gid = int(nh["id"])
        weights: Mapping[int, int] = counted.get(gid) or _members(nh)
        total = sum(weights.values())
        shares: dict[str, float] = {}
        for member in _members(nh):
            if member in via:
                shares[via[member]] = weights.get(member, 0) / total if total else 0.0
        out[gid] = shares
    return out


def path_share(nexthops: Iterable[Doc], buckets: Iterable[Doc], address: str) -> float | None:
    """The share of the flows of the group holding ``address`` that go to it; None when no group holds it.
    Several groups hold it (on a worker, one per set of reachable clusters): the largest group's, the one
    most remote CIDRs use."""
    best: tuple[int, float] | None = None
    for shares in group_shares(nexthops, buckets).values():
        if address in shares and (best is None or len(shares) > best[0]):
            best = (len(shares), shares[address])
    return None if best is None else best[1]
