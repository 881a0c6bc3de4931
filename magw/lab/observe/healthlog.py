"""What the route agents of a lab logged about gateway health, in time order (for test failures and debugging).

Reads every ``route-agent-*.log`` of the lab (JSON lines, docs/health.md) and
keeps the events that change which gateways carry traffic: probe state changes
(``health.state_changed``) and Endpoint documents expiring or coming back
(``filebroker.endpoint_expired``, ``filebroker.endpoint_renewed``), or kept although stale
(``filebroker.endpoint_stale_kept``, fail static). Bounded: at
most ``limit`` lines, the latest ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from magw.lab.build.state import LabState
from magw.lab.observe.jsonlog import json_events

EVENTS = ("health.state_changed", "filebroker.endpoint_expired", "filebroker.endpoint_stale_kept",
          "filebroker.endpoint_renewed")


def _line(node: str, event: dict[str, Any]) -> str:
    at = str(event.get("timestamp", "?"))[11:23]
    if event["event"] == "health.state_changed":
        return f"{at} {node}: {event.get('peer')} {event.get('what')} {event.get('old')} -> {event.get('new')}"
    return f"{at} {node}: {event['event'].split('.', 1)[1]} {event.get('file')}"


def _events(path: Path) -> list[dict[str, Any]]:
    return [e for e in json_events(path) if e.get("event") in EVENTS]


def health_history(st: LabState, limit: int = 200) -> list[str]:
    """The health events of every route agent of the lab, oldest first (the last ``limit``)."""
    rows: list[tuple[str, str]] = []
    for path in sorted(st.logs_dir.glob("route-agent-*.log")):
        node = path.name.removeprefix("route-agent-").removesuffix(".log")
        rows.extend((str(e.get("timestamp", "")), _line(node, e)) for e in _events(path))
    return [line for _at, line in sorted(rows)[-limit:]]
