"""The patch formats of PATCH requests ("Patch" in API Concepts / "Update API Objects in Place Using kubectl patch").

- ``application/merge-patch+json``: JSON Merge Patch, RFC 7386 (``merge_patch``): objects merge recursively,
  ``null`` deletes a key, anything else (lists included) replaces.
- ``application/json-patch+json``: JSON Patch, RFC 6902 (``json_patch``): a list of operations add, remove,
  replace, move, copy, test on JSON Pointers (RFC 6901); all or nothing.
- ``application/strategic-merge-patch+json``: built-in types only (a custom resource answers 415, as a real
  server does). The emulator treats it as a merge patch: the real strategic merge merges some lists by a key
  (containers by name, ...) where a merge patch replaces the list. Do not rely on keyed list merging here.

Errors raise ``PatchError``; the handler turns a malformed patch into 400 and a failed operation (a missing
path, a failed ``test``) into 422, as the API server does.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """A patch that cannot be applied; ``malformed`` tells a bad document (400) from a failed operation (422)."""

    def __init__(self, message: str, *, malformed: bool = False) -> None:
        super().__init__(message)
        self.malformed = malformed


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 section 2: the result of applying ``patch`` to ``target``; neither argument is modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer {path!r}", malformed=True)
    if path == "":
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, *, insert: bool) -> int:
    if insert and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (not insert and index == len(container)):
        raise PatchError(f"array index {index} out of range")
    return index


def _parent(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for token in parts[:-1]:
        if isinstance(cur, dict):
            if token not in cur:
                raise PatchError(f"path /{'/'.join(parts)}: {token!r} not found")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(cur, token, insert=False)]
        else:
            raise PatchError(f"path /{'/'.join(parts)}: {token!r} is not in a container")
    return cur


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, token = _parent(doc, parts), parts[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise PatchError(f"path /{'/'.join(parts)} not found")
        return parent[token]
    if isinstance(parent, list):
        return parent[_index(parent, token, insert=False)]
    raise PatchError(f"path /{'/'.join(parts)} not found")


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, token = _parent(doc, parts), parts[-1]
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, token, insert=True), value)
    else:
        raise PatchError(f"path /{'/'.join(parts)}: parent is not a container")
    return doc


def _remove(doc: Any, parts: list[str]) -> tuple[Any, Any]:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent, token = _parent(doc, parts), parts[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise PatchError(f"path /{'/'.join(parts)} not found")
        return doc, parent.pop(token)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, token, insert=False))
    raise PatchError(f"path /{'/'.join(parts)} not found")


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902: apply ``ops`` in order to a copy of ``doc``; any failing operation fails the whole patch."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations", malformed=True)
    out = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}", malformed=True)
        kind, parts = op["op"], _pointer(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {kind} without a value", malformed=True)
        if kind == "add":
            out = _add(out, parts, copy.deepcopy(op["value"]))
        elif kind == "remove":
            out, _ = _remove(out, parts)
        elif kind == "replace":
            _get(out, parts)  # must exist
            if parts:
                out, _ = _remove(out, parts)
            out = _add(out, parts, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from"))
            if kind == "move" and parts[: len(source)] == source and parts != source:
                raise PatchError("cannot move a value into one of its children")
            value = copy.deepcopy(_get(out, source))
            if kind == "move":
                out, _ = _remove(out, source)
            out = _add(out, parts, value)
        elif kind == "test":
            if _get(out, parts) != op["value"]:
                raise PatchError(f"test failed at {op['path']}")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}", malformed=True)
    return out
