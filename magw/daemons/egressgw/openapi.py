"""The OpenAPI 3 document of magw-egress's HTTP API, served unauthenticated at ``GET /openapi.json`` (``document``).

It describes what magw.daemons.egressgw.api accepts and answers (docs/egress-gateway.md, "API"); reading it
tells nothing the source code does not. tests/unit/daemons/test_egress_openapi.py checks every route is in it
and runs schemathesis' generated requests against the real server, checking each answer against it.
"""

from __future__ import annotations

from typing import Any

_STR = {"type": "string"}
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "description": "one line"}},
    "additionalProperties": False,
}
_BINDING = {
    "type": "object",
    "required": ["namespace"],
    "properties": {"namespace": _STR, "service": _STR},
}
_VIP = {
    "type": "object",
    "required": ["name", "vip", "vrid", "candidates", "bindings"],
    "properties": {
        "name": _STR,
        "vip": {"type": "string", "format": "ipv4"},
        "vrid": {"type": "integer", "minimum": 1, "maximum": 255},
        "candidates": {"type": "array", "items": _STR},
        "bindings": {"type": "array", "items": _BINDING},
    },
}
_STATUS = {
    "type": "object",
    "required": ["holder", "since", "services"],
    "properties": {
        "holder": {"type": ["string", "null"]},
        "since": {"type": ["string", "null"]},
        "services": {"type": "array", "items": _STR},
        "conflicts": {"type": "array", "items": _STR},
    },
}
_ANSWER = {
    "type": "object",
    "required": ["vip", "status"],
    "properties": {"vip": _VIP, "status": _STATUS},
    "additionalProperties": False,
}

_LIST = {"type": "object", "required": ["vips"], "properties": {"vips": {"type": "array", "items": _ANSWER}}}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    "400": _json(_ERROR, "the request cannot mean anything: bad JSON, a missing or unknown field, a bad value"),
    "401": _json(_ERROR, "no bearer token, or one the API server's TokenReview does not accept (TCP only)"),
    "403": _json(_ERROR, "the SubjectAccessReview says no (TCP only)"),
    "404": _json(_ERROR, "an unknown VIP, namespace, Service or node"),
    "409": _json(_ERROR, "it contradicts the bindings, or the VIP's file holds other documents"),
    "500": _json(_ERROR, "the broker could not be written"),
    "503": _json(_ERROR, "no snapshot of the cluster yet, or the API server cannot be asked"),
}


def _post(summary: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {"200": _json(_ANSWER, "the VIP's spec and status as written"), **_ERRORS},
        }
    }


_NAME = {"type": "string", "minLength": 1}
_LABEL = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"  # a Kubernetes namespace or Service name (DNS-1123 label)
_VIP_BODY = {
    "oneOf": [
        {
            "type": "object",
            "required": ["action", "vip", "namespace"],
            "properties": {
                "action": {"type": "string", "enum": ["bind", "unbind"]},
                "vip": {**_NAME, "description": "the EgressVIP's name or address"},
                "namespace": {"type": "string", "pattern": f"^{_LABEL}$"},
                "service": {"type": "string", "pattern": f"^({_LABEL})?$", "description": "a Service of it, or none"},
            },
            "additionalProperties": False,
        },
        {
            "type": "object",
            "required": ["action", "vip"],
            "properties": {"action": {"type": "string", "enum": ["notify"]}, "vip": _NAME},
            "additionalProperties": False,
        },
    ]
}
_REPORT = {
    "vip": _NAME,
    "state": {"type": "string", "enum": ["MASTER", "BACKUP", "FAULT", "STOP"], "default": "MASTER"},
    "mac": {"type": "string", "description": "accepted for the seed's callers, not used"},
}
_NOTIFY_BODY = {
    "oneOf": [
        {
            "type": "object",
            "required": ["vip", "node"],
            "properties": {**_REPORT, "node": {**_NAME, "description": "the reporting node's name"}},
            "additionalProperties": False,
        },
        {
            "type": "object",
            "required": ["vip", "node_ip"],
            "properties": {**_REPORT, "node_ip": {"type": "string", "format": "ipv4"}},
            "additionalProperties": False,
        },
    ]
}

_DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "magw-egress",
        "version": "1",
        "description": "The egress gateway's API over EgressVIP objects (docs/egress-gateway.md, 'API'). Over TCP "
        "every request but GET /openapi.json needs a bearer token; over the unix socket its file mode decides, and "
        "the document served there has no security requirement.",
    },
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/vip": {
            **_post("bind or unbind a namespace (or one of its Services) to a VIP, or notify about it", _VIP_BODY),
            "get": {
                "summary": "every VIP's spec and status",
                "responses": {
                    "200": _json(_LIST, "every VIP"),
                    **{k: _ERRORS[k] for k in ("401", "403", "503")},
                },
            },
        },
        "/vip/{name}": {
            "get": {
                "summary": "one VIP's spec and status",
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": _STR}],
                "responses": {
                    "200": _json(_ANSWER, "the VIP"),
                    **{k: _ERRORS[k] for k in ("401", "403", "404", "503")},
                },
            }
        },
        "/master_notify": _post("an egress agent reports a VIP's VRRP state on its node", _NOTIFY_BODY),
        "/openapi.json": {
            "get": {
                "summary": "this document (no authentication: it holds nothing the source code does not)",
                "security": [],
                "responses": {"200": {"description": "the OpenAPI document", "content": {"application/json": {}}}},
            }
        },
    },
}


def document(*, bearer: bool) -> dict[str, Any]:
    """The document as the server that serves it behaves: with the bearer requirement (TCP, Kubernetes) or
    without any (the unix socket, whose file mode is the access control)."""
    if bearer:
        return _DOCUMENT
    doc = dict(_DOCUMENT)
    del doc["security"]
    doc["components"] = {}
    doc["paths"] = {path: {m: {k: v for k, v in op.items() if k != "security"} for m, op in ops.items()}
                    for path, ops in _DOCUMENT["paths"].items()}  # fmt: skip
    for ops in doc["paths"].values():
        for op in ops.values():
            op["responses"] = {code: r for code, r in op["responses"].items() if code not in ("401", "403")}
    return doc
