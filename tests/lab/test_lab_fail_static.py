"""End to end: a cluster's only gateway whose route agent is SIGKILLed loses no datagram (fail static).

The soak's finding (docs/robustness.md): health is what the control plane sees. With the route agent of a
cluster's lone gateway dead, its liveness lease runs out (1 s) and every peer calls it down, although its
kernel still forwards. Before fail static, the peers then planned ``unreachable`` routes toward that cluster
and its flows died until the agent was back (3-6 s in the soak). Now a node whose every candidate is down
keeps them all (docs/planner.md), so the datapath does not notice the restart.

Kernel test: a lab of two clusters with one gateway and one worker each, real daemons, paced UDP flows from a
west pod to an east pod (both gateways on their path); the route agent is killed, the peers are seen calling
the gateway down (so the probes, not a slow restart, are what the test crosses), then it is started again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.soak_faults import kill_daemon
from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import agent_status, daemons_installed
from magw.lab.scenarios.failover import measure_event
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from tests.support.labkit import poll, running_lab

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="magw-route-agent / magw-gateway are not installed (pip -e .)"),
]

SEEN_DOWN_LIMIT = 6.0  # s: lease 1 s + 3 misses; generous for a loaded machine


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    spec = {"gateways": 1, "workers": 1, "pods_per_node": 1}
    topology = parse_topology({"clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})
    with running_lab(topology, daemons=True) as built:
        yield built


def _down_in(st: LabState, lab: LabLayout, observer: str, peer: str) -> bool:
    health = (agent_status(st, lab.node(observer)) or {}).get("health") or {}
    return any(p["hostname"] == peer and p["state"] == "down" for p in health.get("peers", []))


def test_lone_gateway_route_agent_killed_loses_nothing(lab: tuple[LabLayout, LabState]) -> None:
    layout_, st = lab
    victim = "east-gw1"
    observers = ("west-gw1", "east-w1")  # a remote gateway and a local worker, both probe the victim
    kill, restart = kill_daemon(st.name, "route-agent", victim)
    seen: list[str] = []

    def event() -> None:
        kill()
        try:
            poll("the peers call east-gw1 down", lambda: all(_down_in(st, layout_, o, victim) for o in observers),
                 limit=SEEN_DOWN_LIMIT)  # fmt: skip
            seen.extend(observers)
        finally:
            restart()

    client = layout_.cluster("west").pods_of("west-w1")[0]
    server = layout_.cluster("east").pods_of("east-w1")[0]
    result = measure_event(layout_, st, event=event, victim=victim, client=client, server=server, flows=16,
                           rate=200, duration=9.0, event_at=1.0, senders=1)  # fmt: skip
    assert seen == list(observers)
    assert sum(f.sent for f in result.flows) > 0
    assert [(f.sport, f.lost) for f in result.flows] == [(f.sport, 0) for f in result.flows], result.loss_report(
        result.flows
    )
    poll("the peers see east-gw1 up again", lambda: not any(_down_in(st, layout_, o, victim) for o in observers))
    fresh = state.read(st.name)
    assert fresh is not None and [r for r in fresh.processes if r.kind == "route-agent" and r.owner == victim]
