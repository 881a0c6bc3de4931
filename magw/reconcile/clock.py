"""The reconciler's notion of time: a real monotonic clock and a fake one for tests.

The loop never calls ``time`` or ``asyncio.sleep`` directly: it asks its clock for
``now()`` and waits with ``wait(event, timeout)``. ``FakeClock`` only moves when a
test calls ``advance()``, so resync periods and retry backoffs are tested without
sleeping and without timed assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Protocol

import attrs


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale (only differences matter)."""
        ...

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        """Wait until ``event`` is set or ``timeout`` seconds passed; True when the event is set."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` and asyncio timeouts."""

    def now(self) -> float:
        return time.monotonic()

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        if timeout is not None and timeout <= 0:
            return False
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return event.is_set()
        return True


@attrs.define
class _Sleeper:
    deadline: float
    future: asyncio.Future[None]


@attrs.define
class FakeClock:
    """A clock that stands still until ``advance()`` moves it.

    A ``wait`` whose deadline is reached by ``advance`` returns False, exactly as a
    timeout would; a wait whose event is set returns True at once.
    """

    t: float = 1000.0
    _sleepers: list[_Sleeper] = attrs.field(factory=list)

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every waiter whose deadline has come."""
        self.t += seconds
        due = [s for s in self._sleepers if s.deadline <= self.t]
        self._sleepers = [s for s in self._sleepers if s.deadline > self.t]
        for sleeper in due:
            if not sleeper.future.done():
                sleeper.future.set_result(None)

    @property
    def waiting(self) -> int:
        """How many waits are pending with a deadline (lets a test see that the loop went idle)."""
        return sum(1 for s in self._sleepers if not s.future.done())

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        if timeout is not None and timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        event_task: asyncio.Future[Any] = loop.create_task(event.wait())
        waiters: set[asyncio.Future[Any]] = {event_task}
        sleeper: _Sleeper | None = None
        if timeout is not None:
            sleeper = _Sleeper(deadline=self.t + timeout, future=loop.create_future())
            self._sleepers.append(sleeper)
            waiters.add(sleeper.future)
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            event_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await event_task
            if sleeper is not None and sleeper in self._sleepers:
                self._sleepers.remove(sleeper)
        return event.is_set()
