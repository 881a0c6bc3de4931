"""Who probes whom with which echo ids, what the states mean as Health, and which ids a gateway answers. Pure."""

from __future__ import annotations

from ipaddress import IPv4Address

import attrs

from magw.desired.node.planner import plan
from magw.health.echoids import ALIVE_ID, reach_ids
from magw.health.statemachine import PeerState, ProbeState
from magw.health.targets import NO_PLAN, ProbeTarget, probe_plan
from magw.health.view import liveness_ids, merged, probed_health, published
from magw.model import Health
from tests.support.planner_seed import seed_east, with_health

WEST_ID = reach_ids(["west"])["west"]
UP = ProbeState(state=PeerState.UP)
DOWN = ProbeState(state=PeerState.DOWN, misses=3)


def test_worker_probes_every_local_gateway_with_alive_and_reach_ids() -> None:
    """A worker probes e-gw1 and e-gw2 on their 240/8 VTEPs, with id 1 and west's reach id."""
    p = probe_plan(seed_east(), "e-w1")
    assert p.mode == "worker"
    assert p.targets == (
        ProbeTarget(hostname="e-gw1", cluster="east", address=IPv4Address("240.18.0.6"), echo_ids=(1, WEST_ID)),
        ProbeTarget(hostname="e-gw2", cluster="east", address=IPv4Address("240.18.0.8"), echo_ids=(1, WEST_ID)),
    )
    assert p.reach == (("west", WEST_ID),)


def test_gateway_probes_every_remote_gateway_on_the_tunnel_with_alive_only() -> None:
    """An active gateway probes w-gw1 and w-gw2 on their 241/8 VTEPs with id 1, and not its local peer."""
    p = probe_plan(seed_east(), "e-gw1")
    assert p.mode == "gateway"
    assert [(t.hostname, str(t.address), t.echo_ids, t.policy, t.late_pending) for t in p.targets] == [
        ("w-gw1", "241.18.0.4", (1,), "always", True),
        ("w-gw2", "241.18.0.9", (1,), "always", True),
    ]


def test_single_gateway_mode_counts_only_the_active_gateways_misses() -> None:
    """Single-gateway mode: e-gw2 (standby) probes e-gw1 like a worker; e-gw1 probes e-gw2 (alive only) and
    both west gateways. Only active gateways can be declared down (w-gw1 only once it has answered: one that
    just took over builds its tunnel first); standbys never (w-gw2 has no tunnel at all). No target starts
    pending (a standby that never answers must stay usable for the takeover)."""
    snap = seed_east(multi_active=False)
    standby = probe_plan(snap, "e-gw2")
    assert [(t.hostname, t.policy) for t in standby.targets] == [("e-gw1", "always")]
    assert standby.mode == "worker"
    active = probe_plan(snap, "e-gw1")
    assert [(t.hostname, t.echo_ids, t.policy, t.late_pending) for t in active.targets] == [
        ("e-gw2", (1,), "never", False),
        ("w-gw1", (1,), "after_seen", False),
        ("w-gw2", (1,), "never", False),
    ]
    worker = probe_plan(snap, "e-w1")
    assert [(t.hostname, t.policy) for t in worker.targets] == [("e-gw1", "always"), ("e-gw2", "never")]


def test_standby_becomes_a_prober_of_remote_gateways_when_the_active_one_is_down() -> None:
    """With e-gw1 down, e-gw2 plans as the gateway: it probes west's gateways, and e-gw1 for its return."""
    p = probe_plan(with_health(seed_east(multi_active=False), down=["e-gw1"]), "e-gw2")
    assert (p.mode, [t.hostname for t in p.targets]) == ("gateway", ["e-gw1", "w-gw1", "w-gw2"])


def test_unknown_node_probes_nothing() -> None:
    """A node not (yet) in the snapshot has no targets."""
    assert probe_plan(seed_east(), "e-w9") == NO_PLAN


def test_worker_health_down_and_reach() -> None:
    """e-gw1's id 1 is down -> down; e-gw2 is alive but lost west -> reach {} for it, and e-gw1 keeps west."""
    p = probe_plan(seed_east(), "e-w1")
    a1, a2 = (t.address for t in p.targets)
    states = {(a1, ALIVE_ID): DOWN, (a1, WEST_ID): UP, (a2, ALIVE_ID): UP, (a2, WEST_ID): DOWN}
    assert probed_health(p, states) == Health(down={"e-gw1"}, reach={"e-gw1": {"west"}, "e-gw2": set()})


def test_only_a_returning_gateway_is_held_while_its_reach_settles() -> None:
    """West's reach id of both gateways has answered once after being down. e-gw1 has just come back (returning):
    it is held in ``down``. e-gw2 had been up all along (its reach of west was lost and is coming back): it is
    not held, so an up gateway is never taken out of its groups by the barrier."""
    p = probe_plan(seed_east(), "e-w1")
    a1, a2 = (t.address for t in p.targets)
    settling = ProbeState(state=PeerState.DOWN, successes=1)
    states = {(a1, ALIVE_ID): UP, (a1, WEST_ID): settling, (a2, ALIVE_ID): UP, (a2, WEST_ID): settling}
    assert probed_health(p, states, returning={a1}) == Health(down={"e-gw1"}, reach={"e-gw1": set(), "e-gw2": set()})
    states[(a1, WEST_ID)] = UP
    assert probed_health(p, states, returning={a1}) == Health(reach={"e-gw1": {"west"}, "e-gw2": set()})


def test_unknown_states_are_usable() -> None:
    """Before any outcome every gateway is up and reaches every cluster."""
    p = probe_plan(seed_east(), "e-w1")
    assert probed_health(p, {}) == Health(reach={"e-gw1": {"west"}, "e-gw2": {"west"}})


def test_gateway_health_has_no_reach() -> None:
    """A gateway reports remote gateways down; reach is a worker's notion."""
    p = probe_plan(seed_east(), "e-gw1")
    states = {(p.targets[1].address, ALIVE_ID): DOWN}
    assert probed_health(p, states) == Health(down={"w-gw2"})


def test_probed_health_changes_the_plan_to_one_group_member() -> None:
    """The planner given the probed health keeps only e-gw2 in the worker's group toward west."""
    snap = seed_east()
    p = probe_plan(snap, "e-w1")
    states = {(p.targets[0].address, ALIVE_ID): DOWN}
    health = merged(snap.health, probed_health(p, states))
    groups = plan(attrs.evolve(snap, health=health), "e-w1").groups
    assert [[m.id for m in g.members] for g in groups] == [[0x60120008]]


def test_merge_unions_down_and_intersects_reach() -> None:
    """An operator's Health document and the probes combine: down if either says so, reach only where both agree."""
    document = Health(down={"w-gw1"}, reach={"e-gw1": {"west", "north"}})
    probed = Health(down={"e-gw2"}, reach={"e-gw1": {"west"}, "e-gw2": {"west"}})
    assert merged(document, probed) == Health(down={"w-gw1", "e-gw2"}, reach={"e-gw1": {"west"}, "e-gw2": {"west"}})


def test_gateway_answers_alive_and_every_reachable_cluster() -> None:
    """A gateway answers id 1 and west's reach id while any west gateway is not down in its own view."""
    assert liveness_ids(seed_east(), "e-gw1", Health(down={"w-gw1"})) == {ALIVE_ID, WEST_ID}


def test_gateway_stops_leasing_a_cluster_whose_gateways_are_all_down() -> None:
    """Lost every west gateway (e.g. its WAN link is down): only id 1 stays in the liveness set."""
    assert liveness_ids(seed_east(), "e-gw1", Health(down={"w-gw1", "w-gw2"})) == {ALIVE_ID}


def test_workers_answer_nothing() -> None:
    """A worker has no liveness table at all (None), so its VTEP answers pings as any host would."""
    assert liveness_ids(seed_east(), "e-w1", Health()) is None


def test_gateway_answers_nothing_before_its_endpoint_is_published_or_its_role_is_synced() -> None:
    """Without its own Endpoint, or while not ready (its kernel not yet synced to its role), a gateway node
    keeps its liveness table but answers no id: probes of it fail."""
    snap = seed_east()
    unpublished = attrs.evolve(snap, endpoints=[e for e in snap.endpoints if e.hostname != "e-gw1"])
    assert liveness_ids(unpublished, "e-gw1", Health()) == frozenset()
    assert liveness_ids(snap, "e-gw1", Health(), ready=False) == frozenset()
    assert [published(unpublished, "e-gw1"), published(snap, "e-gw1")] == [False, True]
