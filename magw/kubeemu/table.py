"""``meta.k8s.io/v1`` Table answers: what ``kubectl get`` asks for (``Accept: application/json;as=Table;...``).

A custom resource's columns are its CRD's ``additionalPrinterColumns`` (``ResourceType.columns``), evaluated with
the JSONPath subset CRDs use (``.a.b``, ``.a[*].b``, ``.a[0]``, ``.a[?(@.k=="v")].b``); without them, Name and
Age, as a real server. Built-in types get a few columns of their own (``BUILTIN_COLUMNS``). A ``date`` column is
shown as an age (``5m``), as the server's convertor does; a column of ``priority`` > 0 is shown by ``-o wide``.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from magw.kubeemu.resources import ResourceType

TABLE = "as=Table"
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
BUILTIN_COLUMNS: dict[str, tuple[Mapping[str, Any], ...]] = {
    "Namespace": ({"name": "Status", "type": "string", "jsonPath": ".status.phase"}, _AGE),
    "Node": (
        {"name": "Status", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        _AGE,
        {"name": "Internal-IP", "type": "string", "jsonPath": ".status.addresses[0].address", "priority": 1},
    ),
    "Pod": (
        {"name": "Status", "type": "string", "jsonPath": ".status.phase"},
        _AGE,
        {"name": "IP", "type": "string", "jsonPath": ".status.podIP", "priority": 1},
        {"name": "Node", "type": "string", "jsonPath": ".spec.nodeName", "priority": 1},
    ),
    "Service": (
        {"name": "Type", "type": "string", "jsonPath": ".spec.type"},
        {"name": "Cluster-IP", "type": "string", "jsonPath": ".spec.clusterIP"},
        _AGE,
    ),
    "Lease": ({"name": "Holder", "type": "string", "jsonPath": ".spec.holderIdentity"}, _AGE),
    "EndpointSlice": ({"name": "AddressType", "type": "string", "jsonPath": ".addressType"}, _AGE),
}

_STEP = re.compile(r"""\.([A-Za-z0-9_-]+)|\[(\*|\d+)\]|\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*["']([^"']*)["']\)\]""")


def wants_table(accept: str) -> bool:
    """Whether the Accept header asks for a Table first (kubectl: ``application/json;as=Table;v=1;g=meta.k8s.io``)."""
    first = accept.split(",")[0].replace(" ", "")
    return TABLE in first and "g=meta.k8s.io" in first


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Every value ``path`` (the subset above) selects in ``obj``; missing keys select nothing."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    values = [obj]
    pos = 0
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None:
            return []  # outside the subset: an empty cell rather than an error
        pos = m.end()
        key, index, filter_key, filter_value = m.groups()
        out: list[Any] = []
        for v in values:
            if key is not None and isinstance(v, Mapping) and key in v:
                out.append(v[key])
            elif index == "*" and isinstance(v, list):
                out.extend(v)
            elif index is not None and index != "*" and isinstance(v, list) and int(index) < len(v):
                out.append(v[int(index)])
            elif filter_key is not None and isinstance(v, list):
                out.extend(x for x in v if _lookup(x, filter_key) == filter_value)
        values = out
    return values


def _lookup(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def age(timestamp: str, now: datetime.datetime | None = None) -> str:
    """``5s``, ``3m``, ``2h``, ``4d``: how long ago an RFC 3339 time was (``<unknown>`` when not one)."""
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return "<unknown>"
    seconds = int(((now or datetime.datetime.now(datetime.UTC)) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size or (unit == "m" and seconds >= size):
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _cell(column: Mapping[str, Any], obj: Mapping[str, Any]) -> Any:
    values = jsonpath(obj, str(column.get("jsonPath", "")))
    if not values:
        return None
    if column.get("type") == "date":
        return age(str(values[0]))
    if len(values) == 1:
        return values[0]
    return ",".join(v if isinstance(v, str) else json.dumps(v) for v in values)


def columns(rt: ResourceType) -> tuple[Mapping[str, Any], ...]:
    if rt.columns:
        return rt.columns
    return BUILTIN_COLUMNS.get(rt.kind, (_AGE,))


def table(rt: ResourceType, objects: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The Table of ``objects`` (each row carries its whole object, as ``includeObject=Object``)."""
    cols = columns(rt)
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}]
    definitions += [
        {
            "name": str(c.get("name", "")),
            "type": str(c.get("type", "string")),
            "format": str(c.get("format", "")),
            "description": str(c.get("description", "")),
            "priority": int(c.get("priority", 0)),
        }
        for c in cols
    ]
    rows = [
        {
            "cells": [obj.get("metadata", {}).get("name", ""), *(_cell(c, obj) for c in cols)],
            "object": {"kind": rt.kind, "apiVersion": rt.api_version, **obj},
        }
        for obj in objects
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(metadata),
        "columnDefinitions": definitions,
        "rows": rows,
    }
