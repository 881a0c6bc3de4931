"""The trigger loop (magw.reconcile.trigger) on a fake clock: coalescing, periodic resync, backoff, pause, stop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import attrs
import pytest
from structlog.testing import capture_logs

from magw.reconcile.clock import FakeClock
from magw.reconcile.retry import Backoff
from magw.reconcile.trigger import DONE, FAILED, Outcome, Trigger, Wake

RESYNC = 30.0
SETTLE = 0.05
BACKOFF = Backoff(base=1.0, cap=4.0)


@attrs.define
class World:
    """A trigger whose pass records its wakes and does what ``script`` says (an Outcome, or an exception)."""

    settle: float = 0.0
    script: list[Outcome | Exception] = attrs.field(factory=list)
    clock: FakeClock = attrs.field(factory=FakeClock)
    wakes: list[Wake] = attrs.field(factory=list)
    gate: asyncio.Event | None = None  # while set to an unset Event, a pass waits for it
    stop: asyncio.Event = attrs.field(factory=asyncio.Event)
    trigger: Trigger = attrs.field(init=False)
    task: asyncio.Task[None] | None = None

    def __attrs_post_init__(self) -> None:
        self.trigger = Trigger(
            "t",
            self._pass,
            resync=RESYNC,
            backoff=BACKOFF,
            settle=self.settle,
            retry_on=(OSError,),
            failed_event="t.pass_failed",
            clock=self.clock,
        )

    async def _pass(self, wake: Wake) -> Outcome:
        self.wakes.append(wake)
        if self.gate is not None:
            await self.gate.wait()
        step = self.script.pop(0) if self.script else DONE
        if isinstance(step, Exception):
            raise step
        return step

    @property
    def reasons(self) -> list[tuple[str, ...]]:
        return [w.reasons for w in self.wakes]

    async def start(self) -> None:
        self.task = asyncio.create_task(self.trigger.run(self.stop))
        await self.until(lambda: len(self.wakes) == 1)
        await self.idle()

    async def until(self, predicate: Callable[[], bool], *, limit: int = 2000) -> None:
        """Let the loop run until ``predicate`` holds (bounded by event-loop turns, not by time)."""
        for _ in range(limit):
            if predicate():
                return
            await asyncio.sleep(0)
        raise AssertionError("condition not reached within the safety limit")

    async def idle(self) -> None:
        await self.until(lambda: self.trigger.phase == "idle" and self.clock.waiting == 1)

    async def advance(self, seconds: float) -> None:
        """Move the fake clock, then let the loop serve whatever became due until it waits again."""
        self.clock.advance(seconds)
        await self.idle()

    async def finish(self) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)


@pytest.fixture
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    with capture_logs() as captured:
        yield captured


async def test_the_first_pass_runs_at_once_then_nothing_until_asked() -> None:
    """run() starts with one pass (reason start, not marked) and then waits: no pass without a mark or timer."""
    w = World()
    await w.start()
    for _ in range(50):
        await asyncio.sleep(0)
    assert w.wakes == [Wake(reasons=("start",), marked=False)]
    await w.finish()
    assert w.trigger.phase == "stopped" and w.trigger.passes == 1


async def test_marks_during_a_pass_give_one_more_pass_with_every_reason() -> None:
    """Ten marks (three distinct reasons) while a pass runs are served by exactly one more pass, which names
    each reason once, in the order they first came."""
    w = World()
    await w.start()
    w.gate = asyncio.Event()
    w.trigger.mark_dirty("a")
    await w.until(lambda: len(w.wakes) == 2)  # the pass for "a" is running, held by the gate
    for reason in ["b", "c", "b", "c", "b", "c", "b", "c", "b", "c"]:
        w.trigger.mark_dirty(reason)
    w.gate.set()
    await w.idle()
    assert w.reasons == [("start",), ("a",), ("b", "c")]
    assert all(wake.marked for wake in w.wakes[1:])
    await w.finish()


async def test_marks_within_the_settle_delay_are_one_pass_after_it() -> None:
    """With a settle delay, the first mark starts it; marks before it ends join the same pass, which runs only
    once the delay has passed on the clock."""
    w = World(settle=SETTLE)
    await w.start()
    w.trigger.mark_dirty("x")
    await w.until(lambda: w.trigger.phase == "settling" and w.clock.waiting == 1)
    w.trigger.mark_dirty("y")
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(w.wakes) == 1  # still settling: the clock did not move
    await w.advance(SETTLE)
    assert w.reasons == [("start",), ("x", "y")]
    await w.finish()


async def test_a_pass_runs_every_resync_period_and_a_mark_restarts_the_period() -> None:
    """Nothing asked: a pass (reason resync) comes RESYNC seconds after the last one ended, not before; a
    marked pass counts as the last one, so the period starts again from it."""
    w = World()
    await w.start()
    await w.advance(RESYNC - 1)
    assert w.reasons == [("start",)]
    await w.advance(1)
    assert w.reasons == [("start",), ("resync",)]
    assert not w.wakes[-1].marked
    await w.advance(RESYNC / 2)
    w.trigger.mark_dirty("change")
    await w.until(lambda: len(w.wakes) == 3)
    await w.idle()
    await w.advance(RESYNC / 2)  # a full period after the first resync, half a period after the mark
    assert len(w.wakes) == 3
    await w.advance(RESYNC / 2)
    assert w.reasons[-1] == ("resync",) and len(w.wakes) == 4
    await w.finish()


async def test_a_failing_pass_is_retried_with_capped_backoff_and_success_resets_it(
    logs: list[MutableMapping[str, Any]],
) -> None:
    """Failures in a row are retried after 1, 2, 4, 4 s (base 1, cap 4; reason retry), never sooner; each raised
    one is logged under the user's event name with the delay; after a success the next failure waits the base
    again, and the pass after a success waits the resync period."""
    script: list[Outcome | Exception] = [OSError("disk full")] * 5
    w = World(script=[*script, DONE, OSError("again")])
    await w.start()  # the start pass failed: attempt 1
    for delay in (1.0, 2.0, 4.0, 4.0):
        await w.advance(delay - 0.01)
        count = len(w.wakes)
        await w.advance(0.01)
        assert len(w.wakes) == count + 1 and w.reasons[-1] == ("retry",), delay
    assert w.trigger.failing == 5
    await w.advance(4.0)  # the sixth pass succeeds
    assert w.trigger.failing == 0 and len(w.wakes) == 6
    await w.advance(RESYNC)  # the period, not the backoff: this pass fails once more
    assert len(w.wakes) == 7 and w.reasons[-1] == ("resync",)
    await w.advance(1.0)  # back to the base delay
    assert len(w.wakes) == 8
    failed = [e for e in logs if e["event"] == "t.pass_failed"]
    assert [(e["error"], e["attempt"], e["retry_in"]) for e in failed] == [
        ("disk full", 1, 1.0),
        ("disk full", 2, 2.0),
        ("disk full", 3, 4.0),
        ("disk full", 4, 4.0),
        ("disk full", 5, 4.0),
        ("again", 1, 1.0),
    ]
    assert all(e["name"] == "t" and e["log_level"] == "warning" for e in failed)
    await w.finish()


async def test_a_returned_failure_is_retried_without_a_log_and_a_mark_does_not_wait_for_the_retry(
    logs: list[MutableMapping[str, Any]],
) -> None:
    """FAILED (the pass logged its own error) backs off like a raised failure but logs nothing here; a mark
    during the backoff runs a pass at once."""
    w = World(script=[FAILED, FAILED])
    await w.start()
    await w.advance(1.0)
    assert w.trigger.failing == 2 and w.reasons == [("start",), ("retry",)]
    marked_at = w.clock.now()  # the retry is due 2 s later
    w.trigger.mark_dirty("health")
    await w.until(lambda: len(w.wakes) == 3)
    await w.idle()
    assert w.reasons[-1] == ("health",) and w.clock.now() == marked_at
    assert w.trigger.failing == 0
    assert not [e for e in logs if "pass_failed" in e["event"]]
    await w.finish()


async def test_a_pause_holds_marks_until_it_ends() -> None:
    """Outcome(pause=5): marks made meanwhile run no pass before the 5 s are over; then one pass serves them
    (with reason resume); a pause of 0 is a pass at once."""
    w = World(script=[Outcome(pause=5.0), Outcome(pause=0.0)])
    await w.start()
    w.trigger.mark_dirty("snapshot")
    await w.advance(4.9)
    assert len(w.wakes) == 1
    await w.advance(0.1)
    assert w.reasons[1] == ("snapshot", "resume")
    await w.until(lambda: len(w.wakes) == 3)  # the second pass paused 0 s
    assert w.reasons[2] == ("resume",)
    await w.finish()


async def test_stop_while_idle_ends_run_and_stop_during_a_pass_lets_it_finish() -> None:
    """Setting the stop event ends run() promptly when idle; set during a pass, that pass completes and no
    other starts, even with a mark pending; set before run(), not even the first pass runs."""
    w = World()
    w.stop.set()
    await asyncio.wait_for(w.trigger.run(w.stop), 5)
    assert w.wakes == []

    w = World()
    await w.start()
    await w.finish()
    assert len(w.wakes) == 1

    w = World()
    w.gate = asyncio.Event()
    task = asyncio.create_task(w.trigger.run(w.stop))
    await w.until(lambda: len(w.wakes) == 1)
    w.trigger.mark_dirty("late")
    w.stop.set()
    await asyncio.sleep(0)
    assert not task.done()  # the pass still runs
    w.gate.set()
    await asyncio.wait_for(task, 5)
    assert len(w.wakes) == 1 and w.trigger.passes == 1 and w.trigger.phase == "stopped"


async def test_an_unexpected_exception_ends_run() -> None:
    """An exception that is not in ``retry_on`` is a bug: run() raises it instead of retrying."""
    w = World(script=[ValueError("bug")])
    with pytest.raises(ValueError, match="bug"):
        await asyncio.wait_for(w.trigger.run(w.stop), 5)
    assert w.trigger.phase == "stopped"


async def test_a_mark_from_another_thread_runs_a_pass() -> None:
    """mark_dirty is safe from a thread: the pass runs on the loop."""
    w = World()
    await w.start()
    thread = threading.Thread(target=w.trigger.mark_dirty, args=("from-thread",))
    thread.start()
    thread.join()
    await w.until(lambda: len(w.wakes) == 2)
    assert w.reasons[-1] == ("from-thread",)
    await w.finish()


async def test_offload_uses_one_named_worker_thread_that_ends_with_run() -> None:
    """Blocking work offloaded by passes runs in ONE thread named after the trigger, not on the loop, and that
    thread is gone once run() returned."""
    names: list[str] = []
    trigger: Trigger

    async def work(_wake: Wake) -> Outcome:
        names.append(await trigger.offload(lambda: threading.current_thread().name))
        return DONE

    stop = asyncio.Event()
    trigger = Trigger("gn", work, resync=0.001)
    task = asyncio.create_task(trigger.run(stop))
    while len(names) < 3:
        await asyncio.sleep(0.001)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert len(set(names)) == 1 and names[0].startswith("magw-gn") and names[0] != threading.current_thread().name
    assert not [t for t in threading.enumerate() if t.name.startswith("magw-gn")]


def test_bad_settings_are_refused() -> None:
    """A period that is not positive, a negative settle delay, and a pause after a failure are errors."""

    async def noop(_wake: Wake) -> Outcome:
        return DONE

    with pytest.raises(ValueError, match="resync"):
        Trigger("t", noop, resync=0)
    with pytest.raises(ValueError, match="settle"):
        Trigger("t", noop, resync=1, settle=-1)
    with pytest.raises(ValueError, match="pause"):
        Outcome(ok=False, pause=1.0)
    with pytest.raises(ValueError, match="pause"):
        Outcome(pause=-1.0)


def test_a_constant_backoff_retries_at_the_next_tick() -> None:
    """Backoff.constant(interval) (the egress controller's): every failure in a row waits the same interval."""
    assert [Backoff.constant(2.0).delay(n) for n in range(1, 6)] == [2.0] * 5
    assert [Backoff(base=0.1, cap=0.4).delay(n) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.4, 0.4]
