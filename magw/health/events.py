"""What an operator asks of a node's probes after the fact: since when each state holds, and the last changes.

``TransitionLog`` keeps, per probed thing (peer VTEP, echo id), the wall-clock time of its last state
change, and the last ``keep`` changes as ``Transition`` records. A change to ``down`` carries its
``detection``: seconds from the last answered probe of that thing to the moment it was called down (an
upper bound of what detecting the failure cost; the failure happened after that answer left the peer).
Listeners (the metrics) hear of each change as it is recorded. Pure apart from the clocks it is given.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import attrs
import structlog

from magw.health.book import StateKey

log = structlog.get_logger(__name__)

KEEP = 32  # changes kept for the status file (bounded: a flapping peer must not grow it)


def iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds")


@attrs.frozen(kw_only=True)
class Transition:
    """One state change of one probed thing. ``at``: wall-clock seconds (``time.time()``)."""

    at: float
    peer: str
    cluster: str
    address: str
    what: str  # "alive", or the remote cluster whose reach it is
    old: str
    new: str
    detection: float | None = None

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "at": iso(self.at),
            "peer": self.peer,
            "cluster": self.cluster,
            "address": self.address,
            "what": self.what,
            "old": self.old,
            "new": self.new,
        }
        if self.detection is not None:
            doc["detection_seconds"] = round(self.detection, 4)
        return doc


Listener = Callable[[Transition], None]


@attrs.define
class TransitionLog:
    """``since`` per key, the last answer per key (monotonic), the last ``keep`` transitions, and listeners."""

    keep: int = KEEP
    wall: Callable[[], float] = time.time
    since: dict[StateKey, float] = attrs.field(factory=dict)
    _last_ok: dict[StateKey, float] = attrs.field(factory=dict)
    _recent: collections.deque[Transition] = attrs.field(init=False)
    listeners: list[Listener] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self._recent = collections.deque(maxlen=self.keep)

    def answered(self, key: StateKey, now: float) -> None:
        """A probe of ``key`` was answered at monotonic time ``now``."""
        self._last_ok[key] = now

    def forget(self, keys: set[StateKey]) -> None:
        """Drop what is kept of keys no longer probed (bounded by the plan, not by history)."""
        for key in [k for k in self.since if k not in keys]:
            del self.since[key]
        for key in [k for k in self._last_ok if k not in keys]:
            del self._last_ok[key]

    def changed(self, key: StateKey, now: float, **fields: str) -> Transition:
        """Record a state change of ``key`` at monotonic time ``now``; tell the listeners; return the record."""
        wall = self.wall()
        self.since[key] = wall
        last_ok = self._last_ok.get(key)
        detection = now - last_ok if fields.get("new") == "down" and last_ok is not None else None
        event = Transition(at=wall, detection=detection, **fields)
        self._recent.append(event)
        for listener in self.listeners:
            try:
                listener(event)
            except Exception as exc:  # a listener's bug must not stop probing
                log.exception("health.event_listener_failed", error=repr(exc))
        return event

    def recent(self) -> list[Transition]:
        return list(self._recent)

    def since_iso(self, key: StateKey) -> str | None:
        wall = self.since.get(key)
        return None if wall is None else iso(wall)
