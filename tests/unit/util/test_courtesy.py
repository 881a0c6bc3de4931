"""The courtesy gate (magw.util.courtesy): a reader's ``step_aside`` waits while the sync path is busy, never
longer than ``max_wait`` at a time, then goes on for ``grant``; outside a reader it does nothing.

Threads meet through events, and every wait is bounded; the few times asserted are lower bounds (a wait lasted
at least so long) or generous upper ones (seconds against milliseconds)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from magw.util import courtesy
from magw.util.courtesy import Gate, courteous, step_aside


def in_thread(fn: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def test_outside_a_reader_step_aside_never_waits() -> None:
    """The driver code calls step_aside on the sync path too: there it must not wait, busy gate or not."""
    gate = Gate(max_wait=5.0)
    with gate.busy():
        start = time.monotonic()
        for _ in range(1000):
            step_aside()
        assert time.monotonic() - start < 2.0
    assert gate.waits == 0


def test_a_reader_waits_until_the_sync_path_is_done() -> None:
    gate = Gate(max_wait=10.0)
    about_to_step = threading.Event()
    order: list[str] = []

    def reader() -> None:
        with gate.reader():
            about_to_step.set()
            step_aside()
            order.append("reader went on")

    with gate.busy():
        thread = in_thread(reader)
        assert about_to_step.wait(10)
        time.sleep(0.05)  # the reader is in step_aside now, waiting
        order.append("sync done")
    thread.join(10)
    assert order == ["sync done", "reader went on"]
    assert gate.waits == 1 and gate.waited >= 0.04
    assert not gate.is_busy


def test_an_idle_gate_lets_the_reader_through() -> None:
    gate = Gate(max_wait=10.0)
    with gate.reader():
        start = time.monotonic()
        for _ in range(1000):
            step_aside()
        assert time.monotonic() - start < 2.0
    assert gate.waits == 0


def test_a_reader_is_never_starved_a_wait_ends_after_max_wait_then_a_grant() -> None:
    """A gate busy for good: each wait ends after max_wait; during the grant that follows the reader goes on
    without waiting; after it, it waits again."""
    gate = Gate(max_wait=0.05, grant=0.5)
    waits_after: list[int] = []
    with gate.busy():

        def reader() -> None:
            with gate.reader():
                start = time.monotonic()
                step_aside()  # waits max_wait, then the grant starts
                waits_after.append(gate.waits)
                assert time.monotonic() - start >= 0.045
                step_aside()  # inside the grant: no wait
                step_aside()
                waits_after.append(gate.waits)
                time.sleep(0.6)  # the grant is over
                step_aside()
                waits_after.append(gate.waits)

        in_thread(reader).join(20)
    assert waits_after == [1, 1, 2]


def test_busy_nests_and_the_gate_is_idle_only_when_every_holder_is_done() -> None:
    gate = Gate()
    entered, leave = threading.Event(), threading.Event()

    def other_holder() -> None:
        with gate.busy():
            entered.set()
            leave.wait(10)

    thread = in_thread(other_holder)
    assert entered.wait(10)
    with gate.busy():
        with gate.busy():
            assert gate.is_busy
        assert gate.is_busy
    assert gate.is_busy  # the other thread still holds it
    leave.set()
    thread.join(10)
    assert not gate.is_busy


def test_busy_is_released_by_an_exception() -> None:
    gate = Gate()
    with pytest.raises(RuntimeError), gate.busy():
        raise RuntimeError("sync failed")
    assert not gate.is_busy


def test_reader_bindings_are_per_thread_and_restored() -> None:
    outer, inner = Gate(), Gate()
    seen: list[object] = []
    with outer.reader():
        with inner.reader():
            seen.append(courtesy._local.reader.gate)
            in_thread(lambda: seen.append(getattr(courtesy._local, "reader", None))).join(10)
        seen.append(courtesy._local.reader.gate)
    seen.append(getattr(courtesy._local, "reader", None))
    assert seen == [inner, None, outer, None]


def test_courteous_yields_every_item_and_steps_aside_every_n(monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[int] = []
    got: list[int] = []
    monkeypatch.setattr(courtesy, "step_aside", lambda: steps.append(len(got)))
    got.extend(courteous(range(10), every=4))
    assert got == list(range(10))
    assert steps == [0, 4, 8]  # before items 0, 4 and 8


@pytest.mark.parametrize(("max_wait", "grant"), [(0.0, 0.01), (-1.0, 0.01), (0.1, -0.5)])
def test_bad_gate_settings_are_refused(max_wait: float, grant: float) -> None:
    with pytest.raises(ValueError, match="max_wait must be > 0 and grant >= 0"):
        Gate(max_wait=max_wait, grant=grant)
