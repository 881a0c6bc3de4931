"""OpenAPI v3 (``/openapi/v3``) from the served types, and server-side field validation (``fieldValidation``).

kubectl (``apply``, ``create``, ``replace``) validates through the server: it reads ``/openapi/v3``, then the
group version's document, and when the PATCH operation of the kind takes a ``fieldValidation`` parameter it
sends ``fieldValidation=Strict`` and leaves the checking to the server. So each group version's document has,
per kind, the PATCH operation of its item path (with ``x-kubernetes-group-version-kind`` and that parameter) and
the kind's schema: a CRD's ``openAPIV3Schema``, or, for a built-in kind or a type without one, an object that
keeps unknown fields (no validation). ``unknown_fields`` is the check: a field the schema does not declare,
where it neither keeps unknown fields nor has ``additionalProperties``. Strict refuses them (400, as a real
server: ``strict decoding error: unknown field "spec.x"``), Warn answers with a ``Warning`` header per field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from magw.kubeemu.resources import Registry, ResourceType

_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_META = {"apiVersion", "kind", "metadata"}


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _schema_name(rt: ResourceType) -> str:
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{group}.{rt.version}.{rt.kind}"


def _gvk(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _item_path(rt: ResourceType) -> str:
    ns = "/namespaces/{namespace}" if rt.namespaced else ""
    return f"{rt.prefix}{ns}/{rt.plural}/{{name}}"


def gv_document(types: list[ResourceType]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in types:
        ref = {"$ref": f"#/components/schemas/{_schema_name(rt)}"}
        paths[_item_path(rt)] = {
            "patch": {
                "operationId": f"patch{rt.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": _gvk(rt),
                "parameters": [
                    {"name": name, "in": "query", "schema": {"type": "string"}}
                    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
                ],
                "requestBody": {"content": {"application/merge-patch+json": {"schema": {"type": "object"}}}},
                "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
            }
        }
        schema = dict(rt.schema) if rt.schema else dict(_OPEN)
        schema["x-kubernetes-group-version-kind"] = [_gvk(rt)]
        schemas[_schema_name(rt)] = schema
    return {
        "openapi": "3.0.0",
        "info": {"title": "magw kubeemu", "version": "v1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def document(registry: Registry, parts: list[str]) -> dict[str, Any] | None:
    """The document of ``/openapi/v3/<parts>``: the index (no parts) or a group version's; None: not found."""
    gvs = registry.group_versions()
    if not parts:
        index = {}
        for (group, version), types in sorted(gvs.items()):
            doc = json.dumps(gv_document(types), sort_keys=True).encode()
            digest = hashlib.sha256(doc).hexdigest()[:16].upper()
            path = _gv_path(group, version)
            index[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
        return {"paths": index}
    if parts[:1] == ["api"] and len(parts) == 2:
        key = ("", parts[1])
    elif parts[:1] == ["apis"] and len(parts) == 3:
        key = (parts[1], parts[2])
    else:
        return None
    return gv_document(gvs[key]) if key in gvs else None


def unknown_fields(schema: Mapping[str, Any] | None, obj: Any, path: str = "") -> Iterator[str]:
    """The dotted paths of the fields of ``obj`` that ``schema`` does not declare (none without a schema)."""
    if not schema or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(obj, Mapping):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            where = f"{path}.{key}" if path else str(key)
            if props is not None and key in props:
                yield from unknown_fields(props[key], value, where)
            elif isinstance(extra, Mapping):
                yield from unknown_fields(extra, value, where)
            elif not (extra is True or (props is None and extra is None) or (not path and key in _META)):
                yield where
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for i, value in enumerate(obj):
            yield from unknown_fields(schema["items"], value, f"{path}[{i}]")
