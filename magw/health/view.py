"""From probe states to the planner's Health, and to the echo ids of this node's liveness set. Pure.

``probed_health``: a target whose ``ALIVE_ID`` state is down is in ``down``;
on a worker, every target also gets a ``reach`` entry: the remote clusters
whose reach id is not down, and a gateway coming back is held in ``down``
until its reach ids have settled (the admission barrier). ``merged`` combines that with the Health document
of the source (an operator's override): the union of ``down``, the
intersection of ``reach`` where both name a gateway.

``status_document``: the states as plain JSON, for the status file.

``liveness_ids``: what a gateway node answers. Nothing before its own Endpoint
is published and its kernel holds the plan of its role; then ``ALIVE_ID``, and
the reach id of every remote cluster except those it has positive evidence it
cannot reach: every published gateway of that cluster is down in its own
probes. No evidence (a standby, a cluster with no gateway yet) grants reach:
workers avoid a gateway for a cluster only when that gateway knows it lost it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from ipaddress import IPv4Address
from typing import Any

from magw.health.echoids import ALIVE_ID, reach_ids
from magw.health.statemachine import PeerState, ProbeState
from magw.health.targets import ProbePlan
from magw.model import Health, Snapshot

StateKey = tuple[IPv4Address, int]
_UNKNOWN = ProbeState()


def probed_health(
    plan: ProbePlan, states: Mapping[StateKey, ProbeState], *, returning: Collection[IPv4Address] = ()
) -> Health:
    """The Health that the probe states of ``plan`` say.

    ``returning`` (a worker's admission barrier, docs/health.md): gateways whose alive state has just come back
    up. One of them stays in ``down`` while any of its reach ids is on its way up (down, but answering), so it
    enters the groups of all the clusters it reaches at once: one group replace on a worker
    (magw.desired.node.classes), not clusters splitting off into groups of their own and back, which would
    spread their flows afresh. The caller bounds how long a gateway counts as returning.
    """
    down = {t.hostname for t in plan.targets if states.get((t.address, ALIVE_ID), _UNKNOWN).down}
    if plan.mode != "worker":
        return Health(down=down)
    down |= {t.hostname for t in plan.targets if t.address in returning and _settling(plan, states, t.address)}
    reach = {
        t.hostname: {cid for cid, echo_id in plan.reach if not states.get((t.address, echo_id), _UNKNOWN).down}
        for t in plan.targets
    }
    return Health(down=down, reach=reach)


def _settling(plan: ProbePlan, states: Mapping[StateKey, ProbeState], address: IPv4Address) -> bool:
    """True while one of the reach ids of the gateway at ``address`` has answered but is not up yet."""
    for _, echo_id in plan.reach:
        reach = states.get((address, echo_id), _UNKNOWN)
        if reach.state is PeerState.DOWN and reach.in_transition():  # answered, not up yet
            return True
    return False


def merged(document: Health, probed: Health) -> Health:
    """Both sources of health together (the source's Health document and the probes); a gateway is usable
    only if both allow it."""
    reach = dict(document.reach)
    for gw, clusters in probed.reach:
        reach[gw] = reach[gw] & clusters if gw in reach else clusters
    return Health(down=document.down | probed.down, reach=reach)


def published(snapshot: Snapshot, node: str) -> bool:
    """True when ``node``'s own Endpoint is in the snapshot: others route through it once it answers, so its
    kernel must hold the gateway's plan first (a gateway coming back, or re-published, rebuilds its tunnel).

    Only this gates the liveness set, not a change of role: a standby that takes over keeps answering while it
    builds its tunnel, or its workers would declare it down too and fall back to the dead gateway.
    """
    return any(e.hostname == node for e in snapshot.endpoints_of(snapshot.local_cluster))


def liveness_ids(snapshot: Snapshot, node: str, health: Health, *, ready: bool = True) -> frozenset[int] | None:
    """The echo ids ``node`` answers, given the health it plans with; None when it is no gateway (no table).

    Nothing (an empty set) while our own Endpoint is not published, or while not ``ready``: the kernel has
    not yet been synced to the role we plan (a gateway coming back is rebuilding its tunnel).
    """
    me = next((n for n in snapshot.nodes if n.name == node), None)
    if me is None or not me.gateway:
        return None
    if not ready or not published(snapshot, node):
        return frozenset()
    granted = {ALIVE_ID}
    for cid, echo_id in reach_ids(c.id for c in snapshot.remote_clusters).items():
        hosts = [e.hostname for e in snapshot.endpoints_of(cid)]
        if not hosts or not all(h in health.down for h in hosts):
            granted.add(echo_id)
    return frozenset(granted)


def status_document(
    plan: ProbePlan,
    states: Mapping[StateKey, ProbeState],
    health: Health,
    liveness_ids: frozenset[int] | None,
    rtts: Mapping[StateKey, Mapping[str, float]] | None = None,
    since: Callable[[StateKey], str | None] | None = None,
) -> dict[str, Any]:
    """Targets with their states, as plain JSON (the ``health`` part of the route agent's status file);
    ``rtts``: the round-trip statistics of the alive probes (seconds), shown as each peer's ``rtt``;
    ``since``: when the alive state last changed (ISO 8601), shown as each peer's ``since`` when known."""
    peers = []
    for t in plan.targets:
        peer: dict[str, Any] = {
            "hostname": t.hostname,
            "cluster": t.cluster,
            "address": str(t.address),
            "state": states.get((t.address, ALIVE_ID), _UNKNOWN).state.value,
        }
        rtt = (rtts or {}).get((t.address, ALIVE_ID))
        if rtt is not None:
            peer["rtt"] = dict(rtt)
        changed = None if since is None else since((t.address, ALIVE_ID))
        if changed is not None:
            peer["since"] = changed
        if plan.mode == "worker":
            peer["reach"] = {cid: states.get((t.address, i), _UNKNOWN).state.value for cid, i in plan.reach}
        peers.append(peer)
    return {
        "mode": plan.mode,
        "peers": peers,
        "down": sorted(health.down),
        "leases": None if liveness_ids is None else sorted(liveness_ids),
    }
