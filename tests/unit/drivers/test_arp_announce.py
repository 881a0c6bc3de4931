"""magw.drivers.ovs.announce (the ARP requests that teach a gateway router the host's MAC) and when the route
agent's OVN node driver sends them. The frame's oracle is RFC 826's layout written out byte by byte."""

from __future__ import annotations

import threading
import time
from ipaddress import IPv4Address, IPv4Interface
from typing import Any

import pytest

from magw.daemons.route_agent.ovn_node import OvnBridgeDriver
from magw.desired.state import Address, DesiredState
from magw.drivers.ovs.announce import Announcer, arp_request
from magw.reconcile.changeset import ChangeSet, Op
from magw.reconcile.driver import ApplyResult

MAC = bytes.fromhex("0a58a9fefe0a")


def test_the_frame_is_a_broadcast_arp_request_from_our_mac_and_address() -> None:
    frame = arp_request(MAC, IPv4Address("169.254.254.10"), IPv4Address("169.254.254.9"))
    assert frame == bytes.fromhex(
        "ffffffffffff" "0a58a9fefe0a" "0806"  # Ethernet: broadcast, from us, ARP
        "0001" "0800" "06" "04" "0001"  # Ethernet/IPv4, 6- and 4-byte addresses, request
        "0a58a9fefe0a" "a9fefe0a"  # sender: our MAC, 169.254.254.10
        "000000000000" "a9fefe09"  # target: unknown MAC, 169.254.254.9
    )


def test_a_mac_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError, match="6 bytes"):
        arp_request(b"\x01\x02", IPv4Address("10.0.0.1"), IPv4Address("10.0.0.2"))


class Sends:
    def __init__(self, fail: bool = False) -> None:
        self.times: list[float] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            self.times.append(time.monotonic())
        if self.fail:
            raise OSError("no such device")

    def count(self) -> int:
        with self.lock:
            return len(self.times)


def wait_count(sends: Sends, n: int, bound: float = 5.0) -> None:
    deadline = time.monotonic() + bound
    while sends.count() < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_trigger_sends_the_whole_burst_at_its_offsets() -> None:
    sends = Sends()
    ann = Announcer(sends, "test", burst=(0.0, 0.1, 0.3))
    try:
        start = time.monotonic()
        ann.trigger()
        wait_count(sends, 3)
        time.sleep(0.2)  # nothing more comes after the burst
        assert sends.count() == 3
        offsets = [t - start for t in sends.times]
        assert offsets[1] >= 0.09 and offsets[2] >= 0.29  # not before their offsets (a lower bound only)
    finally:
        ann.stop()


def test_a_trigger_during_a_burst_starts_it_again() -> None:
    sends = Sends()
    ann = Announcer(sends, "test", burst=(0.0, 1.0, 1.5))
    try:
        ann.trigger()
        wait_count(sends, 1)
        ann.trigger()  # long before the first burst's second send
        wait_count(sends, 4)
        time.sleep(0.5)
        assert sends.count() == 4  # the first burst's first send, then the whole second burst
    finally:
        ann.stop()


def test_failed_sends_go_on_with_the_burst_and_stop_ends_the_thread() -> None:
    sends = Sends(fail=True)
    ann = Announcer(sends, "test", burst=(0.0, 0.05))
    ann.trigger()
    wait_count(sends, 2)
    assert sends.count() == 2
    ann.stop()
    assert ann._thread is not None and not ann._thread.is_alive()


class Inner:
    def __init__(self, observed: DesiredState) -> None:
        self.observed = observed

    def observe(self) -> DesiredState:
        return self.observed

    def apply(self, changes: ChangeSet) -> ApplyResult:
        return ApplyResult()


class Triggers:
    def __init__(self) -> None:
        self.n = 0

    def trigger(self) -> None:
        self.n += 1


SUB0 = Address(dev="ovn-k8s-sub0", address=IPv4Interface("169.254.254.10/29"))
OTHER = Address(dev="vx-submariner", address=IPv4Interface("240.18.0.11/8"))


def driver(observed: DesiredState, announcer: Any) -> OvnBridgeDriver:
    return OvnBridgeDriver(Inner(observed), None, lambda: False, announcer)


def test_adding_ovn_k8s_sub0_s_address_triggers_a_burst_and_nothing_else_does() -> None:
    t = Triggers()
    d = driver(DesiredState(), t)
    d.apply(ChangeSet(ops=(Op(verb="create", kind="addresses", obj=OTHER),)))
    d.apply(ChangeSet(ops=(Op(verb="delete", kind="addresses", obj=SUB0),)))
    assert t.n == 0
    both = (Op(verb="create", kind="addresses", obj=OTHER), Op(verb="create", kind="addresses", obj=SUB0))
    d.apply(ChangeSet(ops=both))
    assert t.n == 1


def test_a_full_sync_triggers_only_on_a_node_whose_ovn_k8s_sub0_has_its_address() -> None:
    t = Triggers()
    driver(DesiredState(addresses=(OTHER,)), t).observe()
    assert t.n == 0
    driver(DesiredState(addresses=(OTHER, SUB0)), t).observe()
    assert t.n == 1


def test_the_audits_driver_has_no_announcer() -> None:
    d = driver(DesiredState(addresses=(SUB0,)), None)
    d.observe()
    d.apply(ChangeSet(ops=(Op(verb="create", kind="addresses", obj=SUB0),)))  # nothing to trigger: no error either
