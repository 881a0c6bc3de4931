"""What a rule's libnftables JSON expression refers to: sets/maps, map lookups, chains, NAT statements."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

NAT_STATEMENTS = ("snat", "dnat", "masquerade", "redirect")


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def set_refs(expr: Any) -> set[str]:
    """Names of every named set or map the expression uses (``"@name"`` anywhere)."""
    return {n[1:] for n in _walk(expr) if isinstance(n, str) and n.startswith("@") and len(n) > 1}


def lookups(expr: Any) -> list[tuple[str, str]]:
    """``(kind, name)`` of map lookups on a named map: kind ``map`` (a value) or ``vmap`` (a verdict)."""
    out = []
    for node in _walk(expr):
        if not isinstance(node, dict):
            continue
        for kind in ("map", "vmap"):
            inner = node.get(kind)
            if isinstance(inner, dict) and isinstance(inner.get("data"), str) and inner["data"].startswith("@"):
                out.append((kind, inner["data"][1:]))
    return out


def chain_targets(expr: Any) -> set[str]:
    """Chains named by ``jump``/``goto`` verdicts."""
    out = set()
    for node in _walk(expr):
        if isinstance(node, dict):
            for verb in ("jump", "goto"):
                inner = node.get(verb)
                if isinstance(inner, dict) and isinstance(inner.get("target"), str):
                    out.add(inner["target"])
    return out


def nat_statements(expr: Any) -> list[str]:
    """The NAT statements of a rule (top-level statements only: ``snat``, ``dnat``, ...)."""
    if not isinstance(expr, list):
        return []
    return [key for stmt in expr if isinstance(stmt, dict) for key in stmt if key in NAT_STATEMENTS]
