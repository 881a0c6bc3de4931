"""The change history behind watches and consistent reads: every write as an event, since the compaction horizon.

A real API server keeps etcd's revisions for a while and compacts older ones; a watch (or a paginated list)
from a resourceVersion the history no longer covers answers 410 Gone ("Resource versions" and "410 Gone" in
API Concepts). Here the horizon moves when ``compact()`` is called and when the history exceeds its bound (the
oldest events are dropped), so the emulator's memory stays bounded too.

Events hold the object after the change (for DELETED: the last state, carrying the deletion's
resourceVersion, as a watch sends it) and before it, so that the state at an older resourceVersion can be
rebuilt by undoing the later events (``state_at``).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Mapping
from typing import Any

import attrs

Obj = dict[str, Any]
ObjectKey = tuple[str, str]  # (namespace or "", name)
TypeKey = tuple[str, str, str]  # ResourceType.key


@attrs.frozen
class HistoryEvent:
    """One write. ``obj``/``prev`` are never mutated after the event is recorded: readers copy them."""

    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    type_key: TypeKey
    key: ObjectKey
    obj: Obj
    prev: Obj | None


class History:
    def __init__(self, limit: int = 100_000) -> None:
        if limit < 1:
            raise ValueError("history limit must be at least 1")
        self.limit = limit
        self._events: deque[HistoryEvent] = deque()
        self._rvs: deque[int] = deque()
        self.horizon = 0  # every event with rv > horizon is kept

    def __len__(self) -> int:
        return len(self._events)

    def append(self, ev: HistoryEvent) -> None:
        self._events.append(ev)
        self._rvs.append(ev.rv)
        while len(self._events) > self.limit:
            self.horizon = self._events.popleft().rv
            self._rvs.popleft()

    def covers(self, rv: int) -> bool:
        """Whether every change after ``rv`` is still known (a watch or read from ``rv`` can be served)."""
        return rv >= self.horizon

    def since(self, rv: int) -> list[HistoryEvent]:
        """The events after ``rv``, oldest first; the caller checks ``covers(rv)`` first."""
        start = bisect.bisect_right(self._rvs, rv)
        return [self._events[i] for i in range(start, len(self._events))]

    def compact(self, rv: int) -> None:
        """Forget every change up to ``rv``: reads and watches from an older resourceVersion get 410."""
        while self._events and self._events[0].rv <= rv:
            self._events.popleft()
            self._rvs.popleft()
        self.horizon = max(self.horizon, rv)

    def state_at(self, type_key: TypeKey, current: Mapping[ObjectKey, Obj], rv: int) -> dict[ObjectKey, Obj]:
        """The objects of one type as they were at ``rv``: undo the later events, newest first."""
        state = dict(current)
        for ev in reversed(self.since(rv)):
            if ev.type_key != type_key:
                continue
            if ev.prev is None:
                state.pop(ev.key, None)
            else:
                state[ev.key] = ev.prev
        return state
