"""The liveness set in a real kernel: echo requests to a VTEP are answered only while their id is in the set.

Kernel tests in two throwaway namespaces joined by a veth (240/8 addresses, as VTEPs have).
``nft -j list`` is the independent read-back; ICMP ping sockets send the probes.
"""

from __future__ import annotations

import asyncio
import select
import socket
import struct
import time
from pathlib import Path

import pytest

from magw.drivers.netns import run_in_netns
from magw.health.echoids import ALIVE_ID
from magw.health.liveness import TABLE, LivenessKeeper, LivenessTable, refresh_text, remove_liveness_table, table_text
from magw.health.params import LivenessParams
from magw.health.probe import enable_ping_sockets
from tests.support import netns as checker
from tests.support.cli import MagwCli
from tests.support.netns import VethPair

pytestmark = pytest.mark.kernel

PROBER, ANSWERER = "240.77.0.1", "240.77.0.2"
OTHER = "10.77.0.2"  # not a VTEP: never gated


@pytest.fixture
def pair(veth_pair: VethPair) -> tuple[str, str]:
    """(prober namespace, answerer namespace) joined by a veth; the answerer also has a non-VTEP address."""
    a, b = veth_pair.a, veth_pair.b
    checker.run(a, "ip", "addr", "add", f"{PROBER}/8", "dev", veth_pair.a_dev)
    checker.run(a, "ip", "addr", "add", "10.77.0.1/24", "dev", veth_pair.a_dev)
    checker.run(b, "ip", "addr", "add", f"{ANSWERER}/8", "dev", veth_pair.b_dev)
    checker.run(b, "ip", "addr", "add", f"{OTHER}/24", "dev", veth_pair.b_dev)
    enable_ping_sockets(a)
    return a, b


def answered(ns: str, address: str, echo_id: int) -> bool:
    """One echo request with ``echo_id`` from ``ns``; True when a reply comes within 0.5 s."""

    def probe() -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP) as sock:
            sock.bind(("0.0.0.0", echo_id))
            sock.sendto(struct.pack("!BBHHH", 8, 0, 0, 0, 7) + b"test", (address, 0))
            ready, _w, _x = select.select([sock], [], [], 0.5)
            return bool(ready)

    return run_in_netns(ns, probe)


def liveness_elements(ns: str) -> list[int]:
    """The ids in the liveness set as ``nft -j list set`` shows them."""
    doc = checker.nft_json(ns, "list", "set", "ip", TABLE, "lease")
    sets = [item["set"] for item in doc["nftables"] if "set" in item]
    return sorted(e["elem"]["val"] for e in sets[0].get("elem", []))


def test_table_text_is_the_documented_ruleset() -> None:
    """The table, set, chain and rule exactly as docs/health.md shows them; a refresh is flush + add."""
    assert table_text([ALIVE_ID, 0x9000], 1.0) == (
        "add table ip magw_health\n"
        "delete table ip magw_health\n"
        "table ip magw_health {\n"
        "  set lease {\n    typeof icmp id\n    flags timeout\n  }\n"
        "  chain input {\n"
        "    type filter hook input priority -10; policy accept;\n"
        "    icmp type echo-request ip daddr { 240.0.0.0/8, 241.0.0.0/8 } icmp id != @lease drop\n"
        "  }\n"
        "}\n"
        "add element ip magw_health lease { 1 timeout 1000ms, 36864 timeout 1000ms }\n"
    )
    assert refresh_text([], 0.25) == "flush set ip magw_health lease\n"


def test_an_id_in_the_liveness_set_is_answered_and_others_are_dropped(pair: tuple[str, str]) -> None:
    """With id 1 in the set: id 1 is answered, id 2 is not; a non-VTEP address answers any id."""
    a, b = pair
    table = LivenessTable(LivenessParams(timeout=5.0, refresh=1.0), netns=b)
    try:
        table.install([ALIVE_ID])
        assert liveness_elements(b) == [ALIVE_ID]
        assert [answered(a, ANSWERER, ALIVE_ID), answered(a, ANSWERER, 2)] == [True, False]
        assert answered(a, OTHER, 2) is True
    finally:
        table.close()


def test_refresh_replaces_the_ids_in_the_liveness_set(pair: tuple[str, str]) -> None:
    """A refresh puts exactly the ids given in the set: 0x8001 added, 1 gone."""
    a, b = pair
    table = LivenessTable(LivenessParams(timeout=5.0, refresh=1.0), netns=b)
    try:
        table.install([ALIVE_ID])
        table.refresh([0x8001])
        assert liveness_elements(b) == [0x8001]
        assert [answered(a, ANSWERER, ALIVE_ID), answered(a, ANSWERER, 0x8001)] == [False, True]
    finally:
        table.close()


def test_the_liveness_set_expires_without_refresh(pair: tuple[str, str]) -> None:
    """A liveness set of 0.3 s that nobody renews expires: the kernel stops answering (a daemon killed with SIGKILL)."""
    a, b = pair
    table = LivenessTable(LivenessParams(timeout=0.3, refresh=0.1), netns=b)
    try:
        table.install([ALIVE_ID])
        time.sleep(0.6)
        assert liveness_elements(b) == []
        assert answered(a, ANSWERER, ALIVE_ID) is False
    finally:
        table.close()


def test_a_refreshed_liveness_set_outlives_its_timeout(pair: tuple[str, str]) -> None:
    """Renewed every 0.1 s, a 0.5 s liveness set is still held after 1.5 s: flush + add resets the timeout."""
    a, b = pair
    table = LivenessTable(LivenessParams(timeout=0.5, refresh=0.1), netns=b)
    try:
        table.install([ALIVE_ID])
        for _ in range(15):
            time.sleep(0.1)
            table.refresh([ALIVE_ID])
        assert liveness_elements(b) == [ALIVE_ID]
        assert answered(a, ANSWERER, ALIVE_ID) is True
    finally:
        table.close()


def test_hold_for_outlives_the_liveness_timeout(pair: tuple[str, str]) -> None:
    """A clean exit renews the liveness set once for the exit hold: a 0.3 s set held for 3 s still answers after
    0.8 s without any refresh (a restarted agent takes it over meanwhile)."""
    a, b = pair
    table = LivenessTable(LivenessParams(timeout=0.3, refresh=0.1), netns=b)
    try:
        table.install([ALIVE_ID])
        table.hold_for([ALIVE_ID], 3.0)
        time.sleep(0.8)
        assert liveness_elements(b) == [ALIVE_ID]
        assert answered(a, ANSWERER, ALIVE_ID) is True
    finally:
        table.close()


def test_a_restarted_keeper_adopts_the_held_liveness_set_until_it_is_ready(pair: tuple[str, str]) -> None:
    """A clean exit held the liveness set; the next run, before its first sync (provisional: nothing to answer
    yet), adopts the table as it is, so the node keeps answering; its first ready hold then fills it normally. With
    no table left behind, the provisional hold installs an empty one: a fresh node does not answer early."""
    a, b = pair
    first = LivenessTable(LivenessParams(timeout=0.3, refresh=0.1), netns=b)
    first.install([ALIVE_ID])
    first.hold_for([ALIVE_ID], 5.0)
    first.close()

    async def restart() -> tuple[list[int], bool, list[int]]:
        keeper = LivenessKeeper(lambda: LivenessTable(LivenessParams(timeout=0.3, refresh=0.1), netns=b), node="b")
        await keeper.hold(frozenset(), provisional=True)
        adopted = (liveness_elements(b), answered(a, ANSWERER, ALIVE_ID))
        await keeper.hold(frozenset({ALIVE_ID, 0x8001}))
        ready = liveness_elements(b)
        await keeper.release()
        return adopted[0], adopted[1], ready

    assert asyncio.run(restart()) == ([ALIVE_ID], True, [ALIVE_ID, 0x8001])
    assert remove_liveness_table(b) is True

    async def fresh() -> tuple[list[int], bool]:
        keeper = LivenessKeeper(lambda: LivenessTable(LivenessParams(timeout=0.3, refresh=0.1), netns=b), node="b")
        await keeper.hold(frozenset(), provisional=True)
        out = (liveness_elements(b), answered(a, ANSWERER, ALIVE_ID))
        await keeper.release()
        return out

    assert asyncio.run(fresh()) == ([], False)


def test_withdraw_stops_answers_at_once_and_remove_deletes_the_table(pair: tuple[str, str]) -> None:
    """Withdraw empties the set (no answers); remove deletes our table only, and the kernel answers again."""
    a, b = pair
    checker.run(b, "nft", "add", "table", "ip", "foreign")
    table = LivenessTable(LivenessParams(timeout=5.0, refresh=1.0), netns=b)
    try:
        table.install([ALIVE_ID])
        table.withdraw()
        assert (liveness_elements(b), answered(a, ANSWERER, ALIVE_ID)) == ([], False)
        assert table.remove() is True
        tables = sorted(t["table"]["name"] for t in checker.nft_json(b, "list", "tables")["nftables"] if "table" in t)
        assert tables == ["foreign"]
        assert answered(a, ANSWERER, ALIVE_ID) is True
        assert table.remove() is False
    finally:
        table.close()


def test_refresh_recreates_a_table_removed_under_it(pair: tuple[str, str]) -> None:
    """Someone deleted the table (cleanup, flush ruleset): the next refresh puts it back with the liveness set."""
    a, b = pair
    table = LivenessTable(LivenessParams(timeout=5.0, refresh=1.0), netns=b)
    try:
        table.install([ALIVE_ID])
        checker.run(b, "nft", "delete", "table", "ip", TABLE)
        table.refresh([ALIVE_ID])
        assert liveness_elements(b) == [ALIVE_ID]
        assert answered(a, ANSWERER, 2) is False
    finally:
        table.close()


def test_ping_group_range_is_set_in_the_namespace_only(ns: str) -> None:
    """enable_ping_sockets widens net.ipv4.ping_group_range inside the namespace; the host's stays as it was."""
    host_before = Path("/proc/sys/net/ipv4/ping_group_range").read_text()
    assert checker.run(ns, "sysctl", "-n", "net.ipv4.ping_group_range").stdout.split() == ["1", "0"]
    enable_ping_sockets(ns)
    assert checker.run(ns, "sysctl", "-n", "net.ipv4.ping_group_range").stdout.split() == ["0", "0"]
    assert Path("/proc/sys/net/ipv4/ping_group_range").read_text() == host_before


def test_magw_cleanup_removes_the_liveness_table(ns: str, magw_cli: MagwCli) -> None:
    """`magw cleanup --dry-run` names the liveness table and keeps it; `magw cleanup` deletes it (and only it)."""
    checker.run(ns, "nft", "add", "table", "ip", "foreign")
    table = LivenessTable(LivenessParams(timeout=5.0, refresh=1.0), netns=ns)
    try:
        table.install([ALIVE_ID])
    finally:
        table.close()
    dry = magw_cli("cleanup", "--netns", ns, "--dry-run", timeout=60, check=True)
    assert dry.stdout.splitlines()[0] == "would delete nft table ip magw_health (liveness lease)"
    assert sorted(t["table"]["name"] for t in checker.nft_json(ns, "list", "tables")["nftables"] if "table" in t) == [
        "foreign",
        "magw_health",
    ]
    real = magw_cli("cleanup", "--netns", ns, timeout=60, check=True)
    assert real.stdout.splitlines()[0] == "delete nft table ip magw_health (liveness lease)"
    tables = [t["table"]["name"] for t in checker.nft_json(ns, "list", "tables")["nftables"] if "table" in t]
    assert tables == ["foreign"]
