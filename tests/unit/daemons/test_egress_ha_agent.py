"""The egress-HA agent (magw.daemons.egressgw_agent.ha): VRRP events -> master state, conntrackd transitions
(node-wide),
the holder callback, and the status endpoint (magw.daemons.egressgw_agent.status_http) over a UNIX socket."""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from magw.daemons.egressgw_agent.ha import AgentLock, EgressHA
from magw.daemons.egressgw_agent.status_http import serve
from magw.drivers.conntrackd.process import Step
from magw.drivers.keepalived.events import VrrpEvent


class FakeConntrackd:
    """Records the transitions asked of it (the real one is exercised in tests/kernel/test_egress_ha_kernel.py)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _run(self, name: str, options: tuple[str, ...]) -> tuple[Step, ...]:
        self.calls.append(name)
        return tuple(Step(option=o, returncode=0, output="") for o in options)

    def become_master(self) -> tuple[Step, ...]:
        return self._run("master", ("-c", "-f", "-R", "-B"))

    def become_backup(self) -> tuple[Step, ...]:
        return self._run("backup", ("-n",))

    def become_fault(self) -> tuple[Step, ...]:
        return self._run("fault", ())

    def purge(self, vips: tuple[IPv4Address, ...]) -> tuple[Step, ...]:
        self.calls.append("purge " + " ".join(str(v) for v in vips))
        return (Step(option=f"-D --reply-dst {vips[0]}", returncode=0, output="2 flow entries have been deleted."),)


def ev(name: str, state: str) -> VrrpEvent:
    return VrrpEvent(kind="INSTANCE", name=name, state=state, priority=100)  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"2026-01-01T00:00:{self.n:02d}Z"


Changes = list[tuple[str, bool, str]]


def agent(ctd: FakeConntrackd | None = None, purge_delay: float = 1000.0) -> tuple[EgressHA, Changes]:
    calls: list[tuple[str, bool, str]] = []

    async def on_change(vip: str, master: bool, since: str) -> None:
        calls.append((vip, master, since))

    a = EgressHA("n1", conntrackd=ctd, on_holder_change=on_change, clock=Clock(),  # type: ignore[arg-type]
                 purge_delay=purge_delay)  # fmt: skip
    a.vip_addresses = (IPv4Address("172.31.0.100"), IPv4Address("172.31.0.101"))
    return a, calls


async def test_master_state_since_and_callback() -> None:
    a, calls = agent()
    await a.handle(ev("web", "BACKUP"))
    await a.handle(ev("web", "BACKUP"))  # a repeat changes nothing
    await a.handle(ev("web", "MASTER"))
    await a.handle(ev("web", "STOP"))
    assert calls == [("web", True, "2026-01-01T00:00:02Z"), ("web", False, "2026-01-01T00:00:03Z")]
    assert a.status() == {
        "node": "n1",
        "vips": [{"name": "web", "master": False, "state": "STOP", "since": "2026-01-01T00:00:03Z"}],
    }


async def test_group_events_are_ignored() -> None:
    a, calls = agent()
    await a.handle(VrrpEvent(kind="GROUP", name="g", state="MASTER"))
    assert a.status()["vips"] == [] and calls == []


async def test_conntrackd_commits_on_every_master_and_steps_back_only_when_master_of_none() -> None:
    ctd = FakeConntrackd()
    a, _ = agent(ctd)
    await a.handle(ev("a", "BACKUP"))  # at start: backup of everything, as primary-backup.sh does
    await a.handle(ev("a", "MASTER"))
    await a.handle(ev("b", "BACKUP"))  # still master of a: a's flows keep their timers
    await a.handle(ev("b", "MASTER"))
    await a.handle(ev("a", "BACKUP"))  # still master of b
    await a.handle(ev("b", "FAULT"))  # master of none now
    assert ctd.calls == ["backup", "master", "master", "fault"]  # the purges wait (1000 s here)
    assert [name for name, _ in a.transitions] == ctd.calls
    a.close()


async def _settle(a: EgressHA, ctd: FakeConntrackd, calls: int) -> None:
    for _ in range(500):  # bounded: the purge runs in a worker thread
        if len(ctd.calls) >= calls:
            return
        await asyncio.sleep(0.01)


async def test_master_of_none_purges_the_vips_nat_entries_after_the_delay() -> None:
    """Not conntrackd's -t (it flushes every NATed flow of the node): the VIPs' own entries, once."""
    ctd = FakeConntrackd()
    a, _ = agent(ctd, purge_delay=0.0)
    await a.handle(ev("a", "MASTER"))
    await a.handle(ev("a", "BACKUP"))
    await _settle(a, ctd, 3)
    assert ctd.calls == ["master", "backup", "purge 172.31.0.100 172.31.0.101"]
    assert [name for name, _ in a.transitions] == ["master", "backup", "purge"]


async def test_a_master_transition_before_the_delay_cancels_the_purge() -> None:
    ctd = FakeConntrackd()
    a, _ = agent(ctd, purge_delay=1000.0)
    await a.handle(ev("a", "BACKUP"))  # a purge pending
    await a.handle(ev("a", "MASTER"))  # back: its flows are this node's again
    await a.handle(ev("a", "FAULT"))  # a new pending purge
    await a.handle(ev("a", "BACKUP"))  # still the one pending: no second
    pending = [t for t in asyncio.all_tasks() if t.get_name() == "egress-ha-purge-n1"]
    assert ctd.calls == ["backup", "master", "fault", "backup"] and len(pending) == 1
    a.close()
    await asyncio.sleep(0)
    assert pending[0].cancelled() or pending[0].cancelling()


async def test_a_failing_callback_does_not_stop_the_agent() -> None:
    async def boom(vip: str, master: bool, since: str) -> None:
        raise RuntimeError("controller unreachable")

    a = EgressHA("n1", on_holder_change=boom)
    await a.handle(ev("web", "MASTER"))
    await a.handle(ev("web", "BACKUP"))
    assert a.masters() == ()


async def test_status_endpoint_on_a_unix_socket(tmp_path: Path) -> None:
    a, _ = agent()
    await a.handle(ev("web", "MASTER"))
    await a.handle(ev("db", "BACKUP"))
    sock = str(tmp_path / "status.sock")
    runner = await serve(a, path=sock)
    try:
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=sock)) as http:

            async def get(path: str) -> tuple[int, Any]:
                async with http.get(f"http://node{path}") as r:
                    return r.status, await r.json()

            status, body = await get("/status")
            assert status == 200
            assert [(v["name"], v["master"]) for v in body["vips"]] == [("db", False), ("web", True)]
            assert await get("/status/web") == (200, {"name": "web", "node": "n1", "master": True,
                                                      "state": "MASTER", "since": "2026-01-01T00:00:01Z"})  # fmt: skip
            status, body = await get("/status/nope")
            assert status == 404 and "nope" in body["error"]
    finally:
        await runner.cleanup()


def test_agent_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    one, two = AgentLock(str(tmp_path / "l")), AgentLock(str(tmp_path / "l"))
    one.acquire()
    with pytest.raises(OSError):
        two.acquire()
    one.release()
    two.acquire()
    two.release()
