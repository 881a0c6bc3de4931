"""magw.drivers.heap: malloc_trim where glibc has it, nothing (and no error) elsewhere."""

from __future__ import annotations

import ctypes

import pytest

from magw.drivers import heap


def test_gives_back_on_glibc() -> None:
    trimmed: list[int] = []

    class Libc:
        def malloc_trim(self, pad: int) -> int:
            trimmed.append(pad)
            return 1

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ctypes, "CDLL", lambda name: Libc())
        heap.give_back_heap()
    assert trimmed == [0]
    heap.give_back_heap()  # and the real one, on this machine's libc


@pytest.mark.parametrize("error", [OSError("no libc"), AttributeError("malloc_trim")])
def test_nothing_and_no_error_without_malloc_trim(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def cdll(name: object) -> object:
        raise error

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    heap.give_back_heap()
