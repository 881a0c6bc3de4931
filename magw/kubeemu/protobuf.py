"""Request bodies in Kubernetes' protobuf encoding, for the few built-in kinds kubectl creates that way.

kubectl (1.3x) sends built-in types as ``application/vnd.kubernetes.protobuf`` (``kubectl create namespace``,
``kubectl create configmap``) and does NOT resend them as JSON on a 415, so the emulator decodes them: the
envelope (``"k8s\\x00"`` then a ``runtime.Unknown`` with ``typeMeta`` and ``raw``), the ``ObjectMeta`` every
object has as field 1, and the fields of Namespace (``spec.finalizers``) and ConfigMap (``data``,
``immutable``). Any other field of any kind is not understood: ``UnknownProtobuf`` (the caller answers 415).
Field numbers are those of k8s.io/api's ``generated.proto``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MAGIC = b"k8s\x00"


class UnknownProtobuf(ValueError):
    """A body this decoder cannot turn into JSON (malformed, or a field it does not know)."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise UnknownProtobuf("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a message: an int for varints, bytes for length-delimited fields."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(buf, i)
            if i + size > len(buf):
                raise UnknownProtobuf("truncated field")
            yield number, buf[i : i + size]
            i += size
        else:
            raise UnknownProtobuf(f"wire type {wire} of field {number}")


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise UnknownProtobuf("a varint where a length-delimited field was expected")
    return value


def _str(value: int | bytes) -> str:
    return _bytes(value).decode()


def _map_entry(value: int | bytes) -> tuple[str, str]:
    entry = {n: _str(v) for n, v in _fields(_bytes(value))}
    return entry.get(1, ""), entry.get(2, "")


_META_STRINGS = {1: "name", 2: "generateName", 3: "namespace"}
_META_MAPS = {11: "labels", 12: "annotations"}


def _default(value: int | bytes) -> bool:
    """A field Go's encoder writes with its zero value (an empty string or message, 0, false)."""
    return value in (0, b"")


def _empty_message(value: int | bytes) -> bool:
    """A message whose every field has its zero value (``status {phase: ""}``)."""
    return isinstance(value, bytes) and all(_default(v) for _, v in _fields(value))


def _object_meta(buf: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for number, value in _fields(buf):
        if _default(value):
            continue
        if number in _META_STRINGS:
            meta[_META_STRINGS[number]] = _str(value)
        elif number in _META_MAPS:
            key, val = _map_entry(value)
            meta.setdefault(_META_MAPS[number], {})[key] = val
        elif number == 14:
            meta.setdefault("finalizers", []).append(_str(value))
        elif number == 8 and _empty_message(value):
            continue  # a zero creationTimestamp
        else:
            raise UnknownProtobuf(f"ObjectMeta field {number}")
    return {k: v for k, v in meta.items() if v != ""}


def _namespace(number: int, value: int | bytes, obj: dict[str, Any]) -> None:
    if number == 2:
        finalizers = [_str(v) for n, v in _fields(_bytes(value)) if n == 1]
        obj["spec"] = {"finalizers": finalizers} if finalizers else {}
    elif number == 3 and _empty_message(value):
        return  # an empty status
    else:
        raise UnknownProtobuf(f"Namespace field {number}")


def _configmap(number: int, value: int | bytes, obj: dict[str, Any]) -> None:
    if number == 2:
        key, val = _map_entry(value)
        obj.setdefault("data", {})[key] = val
    elif number == 4:
        obj["immutable"] = bool(value)
    elif not _default(value):
        raise UnknownProtobuf(f"ConfigMap field {number}")


def _other(number: int, value: int | bytes, obj: dict[str, Any]) -> None:
    if _empty_message(value):
        return  # an empty spec or status
    raise UnknownProtobuf(f"{obj.get('kind')} field {number}")


_KINDS = {"Namespace": _namespace, "ConfigMap": _configmap}


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object (``kind``, ``apiVersion``, ``metadata`` and what is known)."""
    if not body.startswith(MAGIC):
        raise UnknownProtobuf("no k8s protobuf magic")
    type_meta: dict[int, str] = {}
    raw = b""
    for number, value in _fields(body[len(MAGIC) :]):
        if number == 1:
            type_meta = {n: _str(v) for n, v in _fields(_bytes(value))}
        elif number == 2:
            raw = _bytes(value)
        elif number in (3, 4) and _default(value):
            continue  # contentEncoding, contentType: empty for a plain object
        else:
            raise UnknownProtobuf(f"runtime.Unknown field {number}")
    obj: dict[str, Any] = {"apiVersion": type_meta.get(1, ""), "kind": type_meta.get(2, "")}
    kind_field = _KINDS.get(obj["kind"], _other)
    for number, value in _fields(raw):
        if number == 1:
            obj["metadata"] = _object_meta(_bytes(value))
        else:
            kind_field(number, value, obj)
    return obj
