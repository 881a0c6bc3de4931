"""Whom a node probes, with which echo ids, and which peers may be declared down before answering. Pure.

- A node that plans as an active gateway probes every published gateway of
  every remote cluster on its ``vxlan-tunnel`` VTEP (241/8) with ``ALIVE_ID``;
  in single-gateway mode also the other local gateways (240/8, ``ALIVE_ID``).
- Any other node (a worker, or a standby gateway in single-gateway mode)
  probes every other published gateway of its own cluster on its
  ``vx-submariner`` VTEP (240/8) with ``ALIVE_ID`` and the reach id of every
  remote cluster. All of them, not only the active ones: a standby must be
  known alive before it is needed.

In single-gateway mode only the active gateway's misses count (a remote
standby has no ``vxlan-tunnel`` until it takes over, so it cannot answer),
and the active remote gateway only once it has answered (one that just took
over is still building its tunnel): see ``FailPolicy``.
"""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Literal

import attrs

from magw.desired.node.roles import active_endpoints, node_role
from magw.health.echoids import ALIVE_ID, reach_ids
from magw.health.fastaddr import FastAddress
from magw.health.statemachine import FailPolicy
from magw.model import Endpoint, Snapshot
from magw.model.vtep import vtep_ip

Mode = Literal["gateway", "worker", "none"]


@attrs.frozen(kw_only=True)
class ProbeTarget:
    """One peer: its VTEP, the echo ids sent to it every interval, and whether its misses may take it down."""

    hostname: str
    cluster: str
    address: IPv4Address
    echo_ids: tuple[int, ...]
    policy: FailPolicy = "always"
    late_pending: bool = True  # a target that appears after the monitor started is unusable until it answers


@attrs.frozen(kw_only=True)
class ProbePlan:
    """Everything a node probes. ``reach`` maps remote cluster ids to their reach echo ids."""

    mode: Mode
    targets: tuple[ProbeTarget, ...] = ()
    reach: tuple[tuple[str, int], ...] = ()
    # How many nodes probe each target the way this one does: on a worker, the nodes of its cluster (each probes
    # every local gateway with the same ids), so a gateway answers about probers x ids per round; else 1.
    probers: int = 1

    @property
    def keys(self) -> frozenset[tuple[IPv4Address, int]]:
        """Every (VTEP, echo id) probed."""
        return frozenset((t.address, i) for t in self.targets for i in t.echo_ids)

    @property
    def probes_per_round(self) -> int:
        """The probes this node sends each round (every target's echo ids)."""
        return sum(len(t.echo_ids) for t in self.targets)

    @property
    def answered_per_round(self) -> int:
        """The echoes the busiest target answers each round from every node probing it this way."""
        return self.probers * max((len(t.echo_ids) for t in self.targets), default=0)

    @property
    def echo_ids(self) -> frozenset[int]:
        return frozenset(i for t in self.targets for i in t.echo_ids)


NO_PLAN = ProbePlan(mode="none")


def probe_plan(snapshot: Snapshot, node: str) -> ProbePlan:
    """The probes ``node`` sends given ``snapshot`` (whose health decides who is active)."""
    if node not in {n.name for n in snapshot.nodes}:
        return NO_PLAN
    ids = reach_ids(c.id for c in snapshot.remote_clusters)
    reach = tuple(sorted(ids.items()))
    if not node_role(snapshot, node).gateway:
        local = _local_targets(snapshot, node, (ALIVE_ID, *sorted(ids.values())))
        return ProbePlan(mode="worker", targets=local, reach=reach, probers=max(len(snapshot.nodes), 1))
    remote = tuple(
        _target(snapshot, e, (ALIVE_ID,), inter_cluster=True)
        for c in snapshot.remote_clusters
        for e in snapshot.endpoints_of(c.id)
    )
    # Single-gateway mode: the active gateway keeps watching the others, so that a standby which took over
    # knows when the first one is back (and hands back).
    local = () if snapshot.config.multi_active else _local_targets(snapshot, node, (ALIVE_ID,))
    return ProbePlan(mode="gateway", targets=_sorted(remote + local), reach=reach)


def _policy(snapshot: Snapshot, endpoint: Endpoint, *, inter_cluster: bool) -> FailPolicy:
    if snapshot.config.multi_active:
        return "always"
    if endpoint not in active_endpoints(snapshot, endpoint.cluster):
        return "never"
    return "after_seen" if inter_cluster else "always"


def _target(snapshot: Snapshot, endpoint: Endpoint, echo_ids: tuple[int, ...], *, inter_cluster: bool) -> ProbeTarget:
    return ProbeTarget(
        hostname=endpoint.hostname,
        cluster=endpoint.cluster,
        address=FastAddress(vtep_ip(endpoint.private_ip, inter_cluster=inter_cluster)),
        echo_ids=echo_ids,
        policy=_policy(snapshot, endpoint, inter_cluster=inter_cluster),
        late_pending=snapshot.config.multi_active,
    )


def _local_targets(snapshot: Snapshot, node: str, echo_ids: tuple[int, ...]) -> tuple[ProbeTarget, ...]:
    targets = tuple(
        _target(snapshot, e, echo_ids, inter_cluster=False)
        for e in snapshot.endpoints_of(snapshot.local_cluster)
        if e.hostname != node
    )
    return _sorted(targets)


def _sorted(targets: tuple[ProbeTarget, ...]) -> tuple[ProbeTarget, ...]:
    return tuple(sorted(targets, key=lambda t: (t.address, t.hostname)))
