"""The JSON event lines of a lab process's log (daemons and lab payloads log one JSON object per line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def json_events(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` that is a JSON object, in order; other lines are skipped; [] for no file."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    out = []
    for raw in text.splitlines():
        if not raw.startswith("{"):
            continue
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out
