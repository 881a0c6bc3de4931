"""The OVN syncer component: when it syncs, what it reports, how it retries. The NB's semantics are the
contract suite's (tests/unit/drivers/test_ovn_contract.py); here the driver is a recorder that holds what was
applied."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from magw.daemons.route_agent.ovn_syncer import OvnSyncer
from magw.desired.ovn.planner import OvnPlan
from magw.desired.ovn.rows import OvnState
from magw.model import Snapshot
from magw.reconcile.ovndiff import OvnChangeSet
from magw.reconcile.ovnsync import sync_ovn
from tests.support.ovn_snapshots import chassis_of, east_snapshot


@attrs.define
class Source:
    """The part of a StateSource the syncer uses."""

    snapshot: Snapshot | None = None
    initial_sync_done: bool = False
    local_cluster: str = "east"
    listeners: list[Callable[[Snapshot | None], None]] = attrs.field(factory=list)

    def subscribe(self, listener: Callable[[Snapshot | None], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: None

    def publish(self, snapshot: Snapshot) -> None:
        self.snapshot, self.initial_sync_done = snapshot, True
        for listener in self.listeners:
            listener(snapshot)


@attrs.define
class Recorder:
    """Applies a change set to the state it holds; ``fail`` makes every call raise."""

    state: OvnState = attrs.field(factory=OvnState)
    chassis: dict[str, str] = attrs.field(factory=lambda: chassis_of(("gw1", "gw2", "gw3")))
    fail: str | None = None
    applied: list[OvnChangeSet] = attrs.field(factory=list)

    def _check(self) -> None:
        if self.fail:
            raise ConnectionError(self.fail)

    def observe(self) -> OvnState:
        self._check()
        return self.state

    def chassis_by_hostname(self) -> dict[str, str]:
        self._check()
        return dict(self.chassis)

    def apply(self, changes: OvnChangeSet, plan: OvnPlan) -> Any:
        self._check()
        self.applied.append(changes)
        self.state = plan.state


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_nothing_is_written_before_the_source_has_synced_then_a_change_syncs_at_once(tmp_path: Path) -> None:
    source, driver = Source(), Recorder()
    status = tmp_path / "ovn.json"
    syncer = OvnSyncer(source, driver, resync_period=3600, status_file=str(status))  # type: ignore[arg-type]
    stop = asyncio.Event()
    task = asyncio.create_task(syncer.run(stop))
    await asyncio.sleep(0.1)
    assert driver.applied == [] and syncer.syncs == 0
    source.publish(east_snapshot())
    await _until(lambda: len(driver.applied) == 1)
    doc = json.loads(status.read_text())
    assert doc["last_sync"]["ok"] and doc["last_sync"]["slots"] == {"gw1": 1, "gw2": 2, "gw3": 3}
    source.publish(east_snapshot(down=("gw2",)))  # a new snapshot: synced without waiting for the resync
    await _until(lambda: len(driver.applied) == 2)
    assert [len(c.updates) for c in driver.applied[1:]] == [1]
    assert json.loads(status.read_text())["last_sync"]["policies"] == {
        "ip4.dst == $submariner_remote_west": ["169.254.254.1", "169.254.254.4"]
    }
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_the_health_view_is_applied_before_planning() -> None:
    source, driver = Source(), Recorder()
    syncer = OvnSyncer(source, driver, planning=lambda s: attrs.evolve(s, health=east_snapshot(down=("gw1",)).health))  # type: ignore[arg-type]
    source.publish(east_snapshot())
    result = await syncer.sync()
    assert result is not None and result.nexthops == {
        "ip4.dst == $submariner_remote_west": ("169.254.254.3", "169.254.254.4")
    }


async def test_a_failing_sync_is_reported_once_retried_and_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source, driver = Source(), Recorder(fail="nb.sock: connection refused")
    status = tmp_path / "ovn.json"
    syncer = OvnSyncer(source, driver, resync_period=3600, status_file=str(status))  # type: ignore[arg-type]
    source.publish(east_snapshot())
    stop = asyncio.Event()
    task = asyncio.create_task(syncer.run(stop))
    await _until(lambda: syncer.syncs >= 3, timeout=10)  # retried without any new event: the backoff
    doc = json.loads(status.read_text())
    assert doc["last_sync"]["ok"] is False
    assert doc["last_sync"]["error"] == "ConnectionError: nb.sock: connection refused"
    driver.fail = None
    await _until(lambda: len(driver.applied) == 1, timeout=15)
    assert json.loads(status.read_text())["last_sync"]["ok"] is True
    stop.set()
    await asyncio.wait_for(task, 5)


def test_a_plan_error_writes_nothing_and_names_the_gateway() -> None:
    driver = Recorder(chassis=chassis_of(("gw1",)))
    result = sync_ovn(driver, east_snapshot())
    assert not result.ok and "no SB chassis has hostname gw2, gw3" in (result.error or "")
    assert driver.applied == []


def test_a_converged_nb_gets_no_transaction() -> None:
    driver = Recorder()
    assert sync_ovn(driver, east_snapshot()).ok
    result = sync_ovn(driver, east_snapshot())
    assert result.ok and result.changes is not None and result.changes.empty
    assert len(driver.applied) == 1


@attrs.define
class Reading(Recorder):
    """A Recorder that notes each read of the NB ("nb") and of the SB ("sb")."""

    reads: list[str] = attrs.field(factory=list)

    def observe(self) -> OvnState:
        self.reads.append("nb")
        return super().observe()

    def chassis_by_hostname(self) -> dict[str, str]:
        self.reads.append("sb")
        return super().chassis_by_hostname()


async def test_a_change_syncs_from_the_known_rows_and_the_period_reads_the_nb_again() -> None:
    """The first sync reads the NB; a new snapshot (a gateway down) is synced from what the last sync left,
    without reading; when the resync period runs out, the NB is read again."""
    source, driver = Source(), Reading()
    reads = driver.reads
    syncer = OvnSyncer(source, driver, resync_period=0.5)  # type: ignore[arg-type]
    source.publish(east_snapshot())
    stop = asyncio.Event()
    task = asyncio.create_task(syncer.run(stop))
    await _until(lambda: len(driver.applied) == 1)
    assert reads == ["nb", "sb"] and syncer.last is not None and syncer.last.observed
    source.publish(east_snapshot(down=("gw2",)))
    await _until(lambda: len(driver.applied) == 2)
    assert reads == ["nb", "sb"] and not syncer.last.observed
    await _until(lambda: len(reads) == 4, timeout=5)  # the period ran out: a full sync
    await _until(lambda: syncer.last is not None and syncer.last.observed)
    stop.set()
    await asyncio.wait_for(task, 5)
