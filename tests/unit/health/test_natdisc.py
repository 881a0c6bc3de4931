"""NAT discovery's state machine and wire format (magw.health.natdisc), with a fake socket and clock: which remote
gateways are asked, what an answer must carry to count, retries, the planning snapshot and the status. The real
sockets across routed and unrouted private networks: tests/lab/test_lab_load_balancer.py."""

from __future__ import annotations

import asyncio
import itertools
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import attrs
import pytest

from magw.health import natdisc
from magw.health.natdisc import NatDiscovery
from magw.model import Cluster, Config, Endpoint, Node, Snapshot

EAST_GW = Endpoint(cluster="east", hostname="e-gw1", private_ip=IPv4Address("172.17.0.11"),
                   public_ip=IPv4Address("198.18.0.200"), public_port=45001)  # fmt: skip
WEST_GW1 = Endpoint(cluster="west", hostname="w-gw1", private_ip=IPv4Address("172.18.0.11"),
                    public_ip=IPv4Address("198.18.0.201"), public_port=45001)  # fmt: skip
WEST_GW2 = Endpoint(cluster="west", hostname="w-gw2", private_ip=IPv4Address("172.18.0.12"))  # no public address


def snapshot(*endpoints: Endpoint) -> Snapshot:
    return Snapshot(
        local_cluster="east",
        config=Config(),
        clusters=tuple(
            Cluster(id=c, pod_cidrs=(IPv4Network(f"10.{i}.0.0/16"),), service_cidrs=(IPv4Network(f"100.{i}.0.0/16"),))
            for i, c in ((1, "east"), (2, "west"))
        ),
        nodes=(Node(name="e-gw1", ip=IPv4Address("172.17.0.11"), cni_ip=IPv4Address("10.1.1.1"), gateway=True),),
        endpoints=endpoints,
    )  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeSocket:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, tuple[str, int]]] = []

    def sendto(self, data: bytes, addr: tuple[str, int]) -> int:
        self.sent.append((data, addr))
        return len(data)


def discovery() -> tuple[NatDiscovery, Clock, FakeSocket, list[str]]:
    clock = Clock()
    nd = NatDiscovery("e-gw1", timeout=0.5, attempts=2, interval=60.0, clock=clock)
    sock = FakeSocket()
    nd._sock = sock  # type: ignore[assignment]  # the socket part is the lab test's
    changes: list[str] = []
    nd.on_change = lambda: changes.append("changed")
    return nd, clock, sock, changes


def test_only_a_gateway_asks_and_only_remote_gateways_with_a_public_address_of_their_own() -> None:
    nd, _clock, _sock, _changes = discovery()
    nd.update(snapshot(WEST_GW1, WEST_GW2))  # e-gw1 publishes no Endpoint: not a gateway yet
    assert (nd.gateway, nd.targets) == (False, {})
    nd.update(snapshot(EAST_GW, WEST_GW1, WEST_GW2))
    assert nd.gateway and list(nd.targets) == ["w-gw1"]


def test_an_answer_to_the_request_in_flight_from_the_private_address_finds_the_private_path() -> None:
    nd, clock, sock, changes = discovery()
    nd.update(snapshot(EAST_GW, WEST_GW1))
    nd.tick()
    ((data, addr),) = sock.sent
    assert addr == ("172.18.0.11", natdisc.PORT)
    kind, nonce, fields = natdisc.parse(data) or (b"", b"", {})
    assert (kind, fields) == (natdisc.REQUEST, {"from": "e-gw1"})
    nd._answered(nonce, ("172.18.0.99", 4490), {"seen": "x"})  # from elsewhere: ignored
    nd._answered(b"\0" * natdisc.NONCE, ("172.18.0.11", 4490), {})  # not the bytes in flight: ignored
    assert nd.targets["w-gw1"].path == "checking" and changes == []
    nd._answered(nonce, ("172.18.0.11", 4490), {"seen": "172.17.0.11:4490"})
    t = nd.targets["w-gw1"]
    assert (t.path, t.seen, t.nonce) == ("private", "172.17.0.11:4490", None) and changes == ["changed"]
    planned = nd.planning_snapshot(snapshot(EAST_GW, WEST_GW1))
    west = next(e for e in planned.endpoints if e.hostname == "w-gw1")
    assert (west.private_path, west.underlay_ip, west.underlay_port) == (True, IPv4Address("172.18.0.11"), None)
    assert next(e for e in planned.endpoints if e.hostname == "e-gw1").private_path is False  # never a local one
    assert nd.status_json()["peers"]["w-gw1"]["path"] == "private"
    clock.now += 30
    nd.tick()
    assert len(sock.sent) == 1  # next check after the interval
    clock.now += 31
    nd.tick()
    assert len(sock.sent) == 2


def test_no_answer_after_every_attempt_is_the_public_path_and_a_recheck_asks_again() -> None:
    nd, clock, sock, changes = discovery()
    nd.update(snapshot(EAST_GW, WEST_GW1))
    nd.tick()
    clock.now += 0.6
    nd.tick()  # the first attempt timed out: the second goes
    assert len(sock.sent) == 2 and nd.targets["w-gw1"].path == "checking"
    clock.now += 0.6
    nd.tick()  # the second timed out: public
    assert len(sock.sent) == 2 and nd.targets["w-gw1"].path == "public" and changes == []
    assert nd.planning_snapshot(snapshot(EAST_GW, WEST_GW1)).endpoints[1].private_path is False
    nd.recheck()
    nd.tick()
    assert len(sock.sent) == 3


def test_a_check_without_an_answer_is_repeated_sooner_and_finds_a_late_listener() -> None:
    """The remote route agent may not listen yet: no answer is checked again after 2, 4, 8 ... s (at most the
    interval), not only after the interval; an answer then finds the private path, and checks go back to the
    interval."""
    nd, clock, sock, changes = discovery()
    nd.update(snapshot(EAST_GW, WEST_GW1))
    starts = []
    for _ in range(8):  # 8 checks without an answer, each of 2 attempts 0.5 s apart
        nd.tick()
        starts.append(clock.now)
        clock.now += 0.6
        nd.tick()
        clock.now += 0.6
        nd.tick()
        assert nd.targets["w-gw1"].path == "public"
        clock.now = nd.targets["w-gw1"].due
    gaps = [round(b - a - 1.2, 1) for a, b in itertools.pairwise(starts)]
    assert gaps == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert len(sock.sent) == 16
    nd.tick()  # the ninth check: this time it answers
    nonce = natdisc.parse(sock.sent[-1][0])[1]  # type: ignore[index]
    nd._answered(nonce, ("172.18.0.11", 4490), {})
    assert nd.targets["w-gw1"].path == "private" and changes == ["changed"]
    assert nd.targets["w-gw1"].due == clock.now + 60.0 and nd.targets["w-gw1"].unanswered == 0


def test_a_private_path_that_stops_answering_goes_back_to_public() -> None:
    nd, clock, sock, changes = discovery()
    nd.update(snapshot(EAST_GW, WEST_GW1))
    nd.tick()
    nonce = natdisc.parse(sock.sent[-1][0])[1]  # type: ignore[index]
    nd._answered(nonce, ("172.18.0.11", 4490), {})
    nd.recheck()
    for _ in range(3):
        nd.tick()
        clock.now += 0.6
    nd.tick()
    assert nd.targets["w-gw1"].path == "public" and changes == ["changed", "changed"]


def test_a_changed_private_address_forgets_what_was_found() -> None:
    nd, _clock, sock, changes = discovery()
    nd.update(snapshot(EAST_GW, WEST_GW1))
    nd.tick()
    nd._answered(natdisc.parse(sock.sent[-1][0])[1], ("172.18.0.11", 4490), {})  # type: ignore[index]
    moved = attrs.evolve(WEST_GW1, private_ip=IPv4Address("172.18.0.50"))
    nd.update(snapshot(EAST_GW, moved))
    assert nd.targets["w-gw1"].path == "checking" and changes == ["changed", "changed"]
    assert nd.planning_snapshot(snapshot(EAST_GW, moved)).endpoints[1].private_path is False


def test_the_responder_echoes_the_bytes_and_the_source_it_saw_at_a_bounded_rate() -> None:
    nd, _clock, sock, _changes = discovery()
    nonce = b"n" * natdisc.NONCE
    for _ in range(natdisc.RATE + 5):
        nd._answer(nonce, ("203.0.113.9", 23456))
    assert len(sock.sent) == natdisc.RATE  # the clock stood still: one second's allowance
    data, addr = sock.sent[0]
    assert addr == ("203.0.113.9", 23456)
    assert natdisc.parse(data) == (natdisc.ANSWER, nonce, {"from": "e-gw1", "seen": "203.0.113.9:23456"})


def test_anything_but_a_discovery_datagram_is_refused() -> None:
    good = natdisc.request_bytes(b"k" * natdisc.NONCE, "x")
    assert natdisc.parse(good) == (natdisc.REQUEST, b"k" * natdisc.NONCE, {"from": "x"})
    bad: list[Any] = [b"", b"magw-nd1Q", b"magw-nd2Q" + b"k" * 16, b"magw-nd1Z" + b"k" * 16, good + b"x" * 600,
                      b"magw-nd1Q" + b"k" * 16 + b"{not json"]  # fmt: skip
    assert [natdisc.parse(b) for b in bad] == [None] * len(bad)
    assert natdisc.parse(b"magw-nd1A" + b"k" * 16 + b"[1]") == (natdisc.ANSWER, b"k" * 16, {})


def test_the_route_agents_flag() -> None:
    from magw.daemons.route_agent.main import build_parser

    parser = build_parser()
    base = ["--node", "e-gw1", "--cluster", "east"]
    assert parser.parse_args(base).nat_discovery_port == natdisc.PORT
    assert parser.parse_args([*base, "--nat-discovery-port", "0"]).nat_discovery_port == 0
    for bad in ("65536", "-1", "x"):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([*base, "--nat-discovery-port", bad])
        assert exited.value.code == 2


def test_the_loop_sleeps_until_something_is_due_and_a_worker_sleeps_long() -> None:
    nd, clock, _sock, _changes = discovery()
    nd._sock = None
    assert nd.next_wait() == natdisc.IDLE  # a worker: nothing to do until a snapshot makes it a gateway
    nd._sock = _sock  # type: ignore[assignment]
    assert nd.next_wait() == 0.0  # a worker with the socket still open: close it now
    nd.update(snapshot(EAST_GW, WEST_GW1))
    assert nd.next_wait() == natdisc.TICK  # a check due now: at the shortest sleep
    nd.tick()
    clock.now += 0.2
    assert round(nd.next_wait(), 3) == 0.3  # the reply's timeout (0.5 s after the request)
    clock.now += 0.3
    nd.tick()
    nd.tick()
    clock.now += 0.5
    nd.tick()  # the second attempt timed out: the public path, checked again in RETRY s (no answer yet)
    assert nd.targets["w-gw1"].path == "public"
    assert nd.next_wait() == natdisc.RETRY
    nd.targets["w-gw1"].due = clock.now + 60.0  # as after an answer: the interval, beyond the longest sleep
    assert nd.next_wait() == natdisc.IDLE


def test_a_new_snapshot_or_a_recheck_wakes_the_loop() -> None:
    nd, _clock, _sock, _changes = discovery()
    nd._wake = asyncio.Event()
    nd.update(snapshot(EAST_GW, WEST_GW1))
    assert nd._wake.is_set()
    nd._wake.clear()
    nd.recheck()
    assert nd._wake.is_set()
