"""Label and field selectors of list and watch requests ("Label selectors" / "Field selectors" in the docs).

Label selector grammar (``k8s.io/apimachinery/pkg/labels``): requirements separated by commas, all must hold:
``key=value``, ``key==value``, ``key!=value`` (also true when the label is absent), ``key in (a,b)``,
``key notin (a,b)`` (also true when absent), ``key`` (exists), ``!key`` (does not exist). An empty selector
matches everything. Field selectors: ``field=value``, ``field==value``, ``field!=value``, comma-separated, on
``metadata.name``, ``metadata.namespace`` and the type's own ``field_labels``; any other field is a 400, as on
a real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from magw.kubeemu.errors import ApiError, bad_request

Matcher = Callable[[Mapping[str, Any]], bool]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b`` is two requirements)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    return [p for p in parts if p.strip()]


def _requirement(text: str) -> Callable[[Mapping[str, str]], bool]:
    if m := _SET_RE.match(text):
        key, op, raw = m.group(1), m.group(2), m.group(3)
        values = frozenset(v.strip() for v in raw.split(",") if v.strip())
        if op == "in":
            return lambda labels: key in labels and labels[key] in values
        return lambda labels: key not in labels or labels[key] not in values
    if m := _CMP_RE.match(text):
        key, op, value = m.group(1), m.group(2), m.group(3)
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: key in labels and labels[key] == value
    if m := _EXISTS_RE.match(text):
        negate, key = m.group(1) == "!", m.group(2)
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: {text.strip()!r}")


def label_selector(selector: str | None) -> Matcher:
    """A predicate on objects for a ``labelSelector`` query value; raises a 400 ``ApiError`` when malformed."""
    if not selector or not selector.strip():
        return lambda obj: True
    reqs = [_requirement(part) for part in _split(selector)]

    def match(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in reqs)

    return match


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The selector's view of a field: strings as they are, booleans ``true``/``false``, missing ``""``."""
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_selector(selector: str | None, supported: tuple[str, ...]) -> Matcher:
    """A predicate for a ``fieldSelector`` query value; a field the type does not support is a 400."""
    if not selector or not selector.strip():
        return lambda obj: True
    allowed = ("metadata.name", "metadata.namespace", *supported)
    reqs: list[tuple[str, bool, str]] = []
    for part in selector.split(","):
        if not part.strip():
            continue
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f"invalid field selector: {part.strip()!r}")
        field, op, value = m.group(1), m.group(2), m.group(3)
        if field not in allowed:
            raise ApiError(400, "BadRequest", f'field label not supported: "{field}"')
        reqs.append((field, op == "!=", value))

    def match(obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, f) == v) != neg for f, neg, v in reqs)

    return match
