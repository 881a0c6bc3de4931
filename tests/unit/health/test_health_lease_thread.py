"""The liveness set is held off the event loop: libnftables calls run in the LivenessKeeper's worker thread.

The monitor's loop reads probe replies against 20 ms deadlines; a liveness refresh (a synchronous
libnftables round trip, four times a second) must not run on it. A stand-in liveness table whose calls wait
for ticks of the loop shows it: on the loop's own thread they would wait in vain.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable

import attrs

from magw.health.echoids import ALIVE_ID, reach_ids
from magw.health.liveness import LivenessKeeper
from magw.health.monitor import HealthMonitor
from magw.health.params import LivenessParams, ProbeParams
from magw.health.probe import EchoSocket
from tests.support.planner_seed import seed_east

WEST_ID = reach_ids(["west"])["west"]
LIMIT = 10.0  # seconds: safety limit of every wait, never reached when the loop keeps running


class Ticker:
    """A task on the loop that ticks every millisecond; ``gate`` opens at the fifth tick."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.ticks = 0
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.001)
            self.ticks += 1
            if self.ticks >= 5:
                self.gate.set()

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@attrs.define
class SlowLivenessTable:
    """A liveness table whose calls wait for the loop's ticks and note (off the loop's thread?, gate seen?)."""

    loop_thread: threading.Thread
    ticker: Ticker
    calls: list[tuple[str, bool, bool]] = attrs.field(factory=list)
    refreshed: list[frozenset[int]] = attrs.field(factory=list)
    held: list[tuple[frozenset[int], float]] = attrs.field(factory=list)

    def _note(self, what: str) -> None:
        self.calls.append((what, threading.current_thread() is not self.loop_thread, self.ticker.gate.wait(LIMIT)))

    def refresh(self, ids: Iterable[int]) -> None:
        self._note("refresh")
        self.refreshed.append(frozenset(ids))

    def withdraw(self) -> None:
        self._note("withdraw")

    def hold_for(self, ids: Iterable[int], seconds: float) -> None:
        self._note("hold_for")
        self.held.append((frozenset(ids), seconds))

    def adopt(self) -> bool:
        self._note("adopt")
        return False

    def remove(self) -> bool:
        self._note("remove")
        return True

    def close(self) -> None:
        self.calls.append(("close", threading.current_thread() is not self.loop_thread, True))


def no_socket(echo_id: int) -> EchoSocket:
    raise OSError(f"no probe sockets in this test (echo id {echo_id})")


async def _run_until_refreshed(liveness: LivenessParams) -> SlowLivenessTable:
    """A gateway's monitor, stopped as soon as its first liveness refresh returned; its liveness table."""
    ticker = Ticker()
    table = SlowLivenessTable(loop_thread=threading.current_thread(), ticker=ticker)
    mon = HealthMonitor(
        "e-gw1", probe=ProbeParams(), liveness=liveness, sockets=no_socket, liveness_table=lambda: table
    )
    mon.update(seed_east())
    stop = asyncio.Event()
    task = asyncio.create_task(mon.run(stop))
    try:
        for _ in range(int(LIMIT * 1000)):  # bounded: until the first refresh returned
            if table.refreshed:
                break
            await asyncio.sleep(0.001)
    finally:
        stop.set()
        await asyncio.wait_for(task, LIMIT)
        await ticker.stop()
    return table


async def test_monitor_refreshes_and_withdraws_its_liveness_set_off_the_loop() -> None:
    """A gateway's monitor installs its liveness set (id 1 and west's id) and, with exit hold 0, withdraws it on stop,
    both in a worker thread while the loop keeps ticking; the table is closed at the end."""
    table = await _run_until_refreshed(LivenessParams(exit_hold=0))
    assert table.refreshed[0] == {ALIVE_ID, WEST_ID}
    assert table.calls[0] == ("refresh", True, True)
    assert table.calls[-2:] == [("withdraw", True, True), ("close", True, True)]


async def test_a_clean_stop_holds_the_liveness_set_for_a_restart() -> None:
    """By default a stop renews the last liveness set once for the exit hold (10 s) instead of withdrawing it: a
    restarted agent takes it over before peers see a miss (docs/health.md: a restart moves no flow)."""
    table = await _run_until_refreshed(LivenessParams())
    assert table.held == [(frozenset({ALIVE_ID, WEST_ID}), 10.0)]
    assert [c[0] for c in table.calls[-2:]] == ["hold_for", "close"]
    assert "withdraw" not in [c[0] for c in table.calls]


async def test_keeper_removes_the_table_off_the_loop_when_the_role_goes() -> None:
    """hold(None) (no gateway role any more) removes and closes the table in the worker thread; release()
    afterwards has nothing to withdraw."""
    ticker = Ticker()
    table = SlowLivenessTable(loop_thread=threading.current_thread(), ticker=ticker)
    keeper = LivenessKeeper(lambda: table, node="e-gw1")
    try:
        await keeper.hold(frozenset({ALIVE_ID}))
        await keeper.hold(None)
        await keeper.release()
    finally:
        await ticker.stop()
    assert table.calls == [("refresh", True, True), ("remove", True, True), ("close", True, True)]
