"""The health monitor against a real kernel: ping sockets in one namespace, an answerer in another.

A worker ``a`` (240.66.0.1) probes its local gateway ``b`` (240.66.0.2) whose
liveness table we drive by hand. Every wait is bounded (polling up to a few
seconds); assertions are on the final Health, never on how long it took.
"""

from __future__ import annotations

import asyncio
import json
import select
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network

import pytest

from magw.health.echoids import ALIVE_ID, reach_ids
from magw.health.liveness import LivenessTable
from magw.health.monitor import HealthMonitor
from magw.health.params import LivenessParams, ProbeParams
from magw.health.probe import EchoSocket, PingSocketError, enable_ping_sockets
from magw.model import Cluster, Endpoint, Health, Node, Snapshot
from tests.support import netns as checker
from tests.support.netns import VethPair

pytestmark = pytest.mark.kernel

WEST_ID = reach_ids(["west"])["west"]
SNAPSHOT = Snapshot(
    local_cluster="east",
    clusters=[
        Cluster(id="east", pod_cidrs=[IPv4Network("10.1.0.0/16")], service_cidrs=[IPv4Network("100.1.0.0/16")]),
        Cluster(id="west", pod_cidrs=[IPv4Network("10.2.0.0/16")], service_cidrs=[IPv4Network("100.2.0.0/16")]),
    ],
    nodes=[
        Node(name="a", ip=IPv4Address("172.66.0.1"), cni_ip=IPv4Address("10.1.1.1")),
        Node(name="b", ip=IPv4Address("172.66.0.2"), cni_ip=IPv4Address("10.1.2.1"), gateway=True),
    ],
    endpoints=[
        Endpoint(cluster="east", hostname="b", private_ip=IPv4Address("172.66.0.2")),
        Endpoint(cluster="west", hostname="w", private_ip=IPv4Address("172.67.0.9")),
    ],
)


@pytest.fixture
def pair(veth_pair: VethPair) -> tuple[str, str]:
    """(prober a, gateway b) joined by a veth: 240.66.0.1 and 240.66.0.2 (VTEP addresses)."""
    a, b = veth_pair.a, veth_pair.b
    checker.run(a, "ip", "addr", "add", "240.66.0.1/8", "dev", veth_pair.a_dev)
    checker.run(b, "ip", "addr", "add", "240.66.0.2/8", "dev", veth_pair.b_dev)
    return a, b


async def until(condition: Callable[[], bool], limit: float = 5.0) -> None:
    """Wait (bounded) until ``condition()`` holds."""
    deadline = asyncio.get_running_loop().time() + limit
    while not condition() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)


async def test_worker_sees_alive_reach_loss_and_death_of_an_answering_gateway(pair: tuple[str, str]) -> None:
    """b answers 1 and west's id: up and reaching west. Only 1: reach lost. Nothing: b down.
    Both again: b back. Each change reached on_change, whose last value is checked."""
    a, b = pair
    enable_ping_sockets(a)
    table = LivenessTable(LivenessParams(timeout=30.0, refresh=1.0), netns=b)
    changes: list[Health] = []
    seen: list[Health] = []
    mon = HealthMonitor("a", probe=ProbeParams(), liveness=LivenessParams(), netns=a, on_change=changes.append)
    mon.update(SNAPSHOT)
    stop = asyncio.Event()
    task = asyncio.create_task(mon.run(stop))
    try:
        table.install([ALIVE_ID, WEST_ID])
        await until(lambda: mon.states().get((IPv4Address("240.66.0.2"), WEST_ID)) is not None)
        seen.append(mon.health)
        table.refresh([ALIVE_ID])
        await until(lambda: mon.health != seen[-1])
        seen.append(mon.health)
        table.refresh([])
        await until(lambda: mon.health != seen[-1])
        seen.append(mon.health)
        table.refresh([ALIVE_ID, WEST_ID])
        await until(lambda: mon.health.down == frozenset() and mon.health != seen[-1])
        seen.append(mon.health)
    finally:
        stop.set()
        await task
        table.close()
    assert seen == [
        Health(reach={"b": {"west"}}),
        Health(reach={"b": set()}),
        Health(down={"b"}, reach={"b": set()}),
        Health(reach={"b": {"west"}}),
    ]
    assert changes[-1] == seen[-1]


@pytest.mark.parametrize(("exit_hold", "after_stop"), [(0.0, ([], False)), (10.0, ([ALIVE_ID, WEST_ID], True))])
async def test_gateway_monitor_holds_its_liveness_set_and_withdraws_it_on_stop(
    pair: tuple[str, str], exit_hold: float, after_stop: tuple[list[int], bool]
) -> None:
    """b's own monitor installs the liveness table with id 1 and west's id (no evidence west is lost),
    answers a's probes while it runs, and when it stops empties the set (exit hold 0) or keeps answering
    for the exit hold (the default: a restart takes the liveness set over)."""
    a, b = pair
    enable_ping_sockets(b)
    enable_ping_sockets(a)
    listed: list[list[int]] = []
    answers: list[bool] = []

    mon = HealthMonitor("b", probe=ProbeParams(), liveness=LivenessParams(exit_hold=exit_hold), netns=b)
    mon.update(SNAPSHOT)
    stop = asyncio.Event()
    task = asyncio.create_task(mon.run(stop))
    try:
        await until(lambda: _elements(b) != [])
        listed.append(_elements(b))
        answers.append(answered(a, "240.66.0.2", ALIVE_ID))
    finally:
        stop.set()
        await task
    listed.append(_elements(b))
    answers.append(answered(a, "240.66.0.2", ALIVE_ID))
    assert (listed[0], answers[0]) == ([ALIVE_ID, WEST_ID], True)
    assert (listed[1], answers[1]) == after_stop


def answered(ns: str, address: str, echo_id: int) -> bool:
    """One echo with ``echo_id`` sent on our own probe socket from ``ns``; True when the reply arrives in 0.5 s."""
    sock = EchoSocket(echo_id, netns=ns)
    try:
        sock.send(IPv4Address(address), 1)
        ready, _w, _x = select.select([sock], [], [], 0.5)
        return bool(ready) and [r.seq for r in sock.replies()] == [1]
    finally:
        sock.close()


def _elements(ns: str) -> list[int]:
    doc = checker.run(ns, "nft", "-j", "list", "set", "ip", "magw_health", "lease", check=False)
    if doc.returncode != 0:
        return []
    sets = [i["set"] for i in json.loads(doc.stdout)["nftables"] if "set" in i]
    return sorted(e["elem"]["val"] for e in sets[0].get("elem", []))


def test_ping_socket_without_group_permission_fails_with_a_clear_error(ns: str) -> None:
    """In a namespace whose ping_group_range excludes us, opening a probe socket names the sysctl."""
    with pytest.raises(PingSocketError) as info:
        EchoSocket(ALIVE_ID, netns=ns)
    assert str(info.value) == "ping socket: Permission denied (is our group in net.ipv4.ping_group_range?)"
