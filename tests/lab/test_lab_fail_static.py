"""End to end: a cluster's only gateway whose route agent or gateway daemon is SIGKILLed loses no datagram
(fail static).

The soak's findings (docs/robustness.md): health is what the control plane sees. With the route agent of a
cluster's lone gateway dead, its liveness lease runs out (1 s) and every peer calls it down, although its
kernel still forwards. Before fail static, the peers then planned ``unreachable`` routes toward that cluster
and its flows died until the agent was back (3-6 s in the soak). Now a node whose every candidate is down
keeps them all (docs/planner.md), so the datapath does not notice the restart. Likewise its gateway daemon
dead for longer than the route agents' ``--endpoint-ttl`` (5 s): the file broker keeps a cluster's stale
Endpoints while none of the cluster is fresh (docs/filebroker.md), where it used to drop the cluster's only one.

Kernel test: a lab of two clusters with one gateway and one worker each, real daemons, paced UDP flows from a
west pod to an east pod (both gateways on their path); the route agent is killed, the peers are seen calling
the gateway down (so the probes, not a slow restart, are what the test crosses), then it is started again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime

import pytest

from benchmarks.soak_faults import kill_daemon
from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.observe.jsonlog import json_events
from magw.lab.planes.daemons import daemons_installed
from magw.lab.scenarios.failover import measure_event
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from tests.support.labkit import poll, running_lab, seen_down_by

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="magw-route-agent / magw-gateway are not installed (pip -e .)"),
]

SEEN_DOWN_LIMIT = 6.0  # s: lease 1 s + 3 misses; generous for a loaded machine
PAST_TTL = 7.0  # s: a gateway daemon dead this long has its Endpoint stale for the route agents (TTL 5 s)


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    spec = {"gateways": 1, "workers": 1, "pods_per_node": 1}
    topology = parse_topology({"clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})
    with running_lab(topology, daemons=True) as built:
        yield built


def assert_lossless(lab: LabLayout, st: LabState, event: Callable[[], None], *, victim: str, duration: float) -> None:
    """16 paced UDP flows from west-w1's pod to east-w1's (through both gateways), ``event()`` one second in: every
    flow sent and none lost a datagram."""
    client = lab.cluster("west").pods_of("west-w1")[0]
    server = lab.cluster("east").pods_of("east-w1")[0]
    result = measure_event(lab, st, event=event, victim=victim, client=client, server=server, flows=16, rate=200,
                           duration=duration, event_at=1.0, senders=1)  # fmt: skip
    assert sum(f.sent for f in result.flows) > 0
    assert [(f.sport, f.lost) for f in result.flows] == [(f.sport, 0) for f in result.flows], result.loss_report(
        result.flows
    )


def test_lone_gateway_route_agent_killed_loses_nothing(lab: tuple[LabLayout, LabState]) -> None:
    layout_, st = lab
    victim = "east-gw1"
    observers = ("west-gw1", "east-w1")  # a remote gateway and a local worker, both probe the victim
    kill, restart = kill_daemon(st.name, "route-agent", victim)
    seen: list[str] = []

    def event() -> None:
        kill()
        try:
            poll("the peers call east-gw1 down", lambda: all(seen_down_by(st, layout_, o, victim) for o in observers),
                 limit=SEEN_DOWN_LIMIT)  # fmt: skip
            seen.extend(observers)
        finally:
            restart()

    assert_lossless(layout_, st, event, victim=victim, duration=9.0)
    assert seen == list(observers)
    poll("the peers see east-gw1 up again", lambda: not any(seen_down_by(st, layout_, o, victim) for o in observers))
    fresh = state.read(st.name)
    assert fresh is not None and [r for r in fresh.processes if r.kind == "route-agent" and r.owner == victim]


def _logged_since(st: LabState, node: str, event: str, since: float) -> list[dict[str, object]]:
    """``event`` lines of ``node``'s route agent log written after wall time ``since``."""
    return [e for e in json_events(st.logs_dir / f"route-agent-{node}.log")
            if e.get("event") == event
            and datetime.fromisoformat(str(e.get("timestamp", "")).replace("Z", "+00:00")).timestamp() >= since]


def test_lone_gateway_daemon_dead_past_the_endpoint_ttl_loses_nothing(lab: tuple[LabLayout, LabState]) -> None:
    layout_, st = lab
    victim = "east-gw1"
    kill, restart = kill_daemon(st.name, "gateway", victim)
    started = time.time()

    def event() -> None:
        kill()
        try:
            time.sleep(PAST_TTL)
        finally:
            restart()

    assert_lossless(layout_, st, event, victim=victim, duration=10.0)
    for observer in ("west-gw1", "east-w1", victim):  # the TTL did pass: each kept the stale document
        kept = _logged_since(st, observer, "filebroker.endpoint_stale_kept", started)
        assert [d["file"] for d in kept][:1] == ["endpoint-east@east-gw1.yaml"], observer
        assert _logged_since(st, observer, "filebroker.endpoint_expired", started) == [], observer
