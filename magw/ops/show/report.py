"""``magw show TOPIC``: the JSON document and the text of one topic, or of every topic (``all``). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from magw.ops.show import render, topics
from magw.ops.show.connections import connection_rows
from magw.ops.show.inputs import Inputs

TOPICS = ("connections", "endpoints", "gateways", "networks", "globalnet", "egressgw", "versions")
TITLES = {
    "connections": "Connections (per node and path)",
    "endpoints": "Endpoints (published gateways)",
    "gateways": "Gateways",
    "networks": "Networks",
    "globalnet": "Globalnet",
    "egressgw": "Egress gateway VIPs",
    "versions": "Versions",
}


def chosen(topic: str) -> tuple[str, ...]:
    return TOPICS if topic == "all" else (topic,)


def document(inputs: Inputs, topic: str, nodes: Sequence[str] | None = None) -> dict[str, Any]:
    """``{"source": ..., TOPIC: rows, ...}`` for the topic, or every topic with ``all``."""
    doc: dict[str, Any] = {"source": inputs.source}
    for t in chosen(topic):
        doc[t] = connection_rows(inputs, nodes) if t == "connections" else getattr(topics, t)(inputs)
    return doc


def text(doc: dict[str, Any], now: datetime) -> str:
    """The tables of ``document``'s topics, each under its title when there are several."""
    present = [t for t in TOPICS if t in doc]
    lines: list[str] = [f"source: {doc['source']}"] if len(present) > 1 else []
    for t in present:
        if len(present) > 1:
            lines += ["", f"== {TITLES[t]}"]
        rows = doc[t]
        if t in ("connections", "egressgw"):
            lines += getattr(render, f"{t}_text")(rows, now)
        else:
            lines += getattr(render, f"{t}_text")(rows)
    return "\n".join(lines) + "\n"
