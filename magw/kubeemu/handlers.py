"""HTTP: the REST paths of the Kubernetes API onto the store, the watch hub and the patch functions.

Paths, as a real API server routes them:

    /api/v1/<plural>[/<name>[/status]]                                    cluster-scoped (nodes, namespaces)
    /api/v1/<plural>                                                      a namespaced type in all namespaces
    /api/v1/namespaces/<ns>/<plural>[/<name>[/status]]                    namespaced
    /apis/<group>/<version>/...                                           the same below a group version

Collections: GET lists (or watches with ``watch=true``/``watch=1``), POST creates. Items: GET, PUT, PATCH,
DELETE; ``/status`` for types with that subresource: GET, PUT, PATCH; a Pod's ``/log``: GET
(``magw.kubeemu.podlogs``). Every error is a ``Status`` object.

Lists ("Resource versions", "Retrieving large results sets in chunks" in API Concepts): the list's
``metadata.resourceVersion`` is the store's current one; ``resourceVersion`` with ``resourceVersionMatch=Exact``
reads the state at that version (410 when compacted), a version newer than the store's is a 504 "Too large
resource version"; ``limit`` and ``continue`` page through one consistent state (a continue token whose
version was compacted is a 410 Expired). Items of built-in types carry no kind/apiVersion, as on a real server.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import attrs
from aiohttp import web

from magw.kubeemu import openapi, podlogs, protobuf, serviceips, table
from magw.kubeemu.discovery import discovery
from magw.kubeemu.errors import ApiError, bad_request, method_not_allowed, status_object, unsupported_media_type
from magw.kubeemu.history import Obj, ObjectKey
from magw.kubeemu.patch import PatchError, json_patch, merge_patch
from magw.kubeemu.protobuf import UnknownProtobuf
from magw.kubeemu.resources import ResourceType
from magw.kubeemu.selectors import field_selector, label_selector
from magw.kubeemu.store import Store
from magw.kubeemu.watch import WatchHub

log = logging.getLogger(__name__)

NOT_FOUND = "the server could not find the requested resource"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


@attrs.frozen
class RequestTarget:
    rt: ResourceType
    namespace: str | None  # None: a namespaced type across all namespaces
    name: str | None
    status: bool


def _resolve(store: Store, parts: list[str]) -> RequestTarget | None:
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    find = store.registry.find
    if rest[0] == "namespaces" and len(rest) >= 3 and (rt := find(group, version, rest[2])) and rt.namespaced:
        namespace: str | None = rest[1]
        tail = rest[3:]
    else:
        found = find(group, version, rest[0])
        if found is None:
            return None
        rt, tail = found, rest[1:]
        if rt.namespaced and tail:
            return None
        namespace = None if rt.namespaced else ""
    if len(tail) > 2 or (len(tail) == 2 and (tail[1] != "status" or not rt.status)):
        return None
    return RequestTarget(rt, namespace, tail[0] if tail else None, len(tail) == 2)


def _encode_continue(rv: int, key: ObjectKey) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": list(key)}).encode()).decode()


def _decode_continue(token: str) -> tuple[int, ObjectKey]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(raw["rv"]), (str(raw["start"][0]), str(raw["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise bad_request("continue key is not valid: malformed token") from None


class Api:
    def __init__(
        self, store: Store, hub: WatchHub, *, pod_logs: Path | None = None, service_ips: IPv4Network | None = None
    ) -> None:
        self.store = store
        self.hub = hub
        self.pod_logs = pod_logs  # where a lab kubelet writes containers' logs (magw.kubeemu.podlogs)
        self.service_ips = service_ips  # ClusterIPs given to Services created without one (magw.kubeemu.serviceips)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._handle(request)
        except ApiError as err:
            return web.json_response(err.status(), status=err.code)
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as err:  # a bug of the emulator: say so as a real server would, and log it
            log.exception("kubeemu: %s %s failed", request.method, request.path_qs)
            return web.json_response(status_object(500, "InternalError", f"internal error: {err}"), status=500)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if request.method == "GET" and (doc := discovery(self.store.registry, parts)) is not None:
            return web.json_response(doc)
        if request.method == "GET" and parts[:2] == ["openapi", "v3"]:
            if (spec := openapi.document(self.store.registry, parts[2:])) is None:
                raise ApiError(404, "NotFound", NOT_FOUND)
            return web.json_response(spec)
        if request.method == "GET" and len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] \
                and parts[4] == "pods" and parts[6] == "log":  # fmt: skip
            return await self._pod_log(request, parts[3], parts[5])
        target = _resolve(self.store, parts)
        if target is None:
            raise ApiError(404, "NotFound", NOT_FOUND)
        query = dict(request.query)
        method = request.method
        if target.name is None:
            if method == "GET":
                if query.get("watch", "").lower() in ("true", "1"):
                    return await self.hub.serve(request, target.rt, target.namespace, query)
                listed = self._list(target, query)
                if table.wants_table(request.headers.get("Accept", "")):
                    return web.json_response(table.table(target.rt, listed["items"], listed["metadata"]))
                return web.json_response(listed)
            if method == "POST" and target.namespace is not None:
                body = await _body(request)
                warned = _validate(target.rt, body, query)  # before creating: Strict refuses
                if self.service_ips is not None and target.rt.kind == "Service" and not target.rt.group:
                    serviceips.allocate(body, serviceips.cluster_ips(self.store.objects(target.rt).values()),
                                        self.service_ips)  # fmt: skip
                created = self.store.create(target.rt, target.namespace, body)
                return _with_warnings(web.json_response(created, status=201), warned)
            raise method_not_allowed(f"{method} is not supported on a {target.rt.qualified} collection")
        warnings: list[str] = []
        obj = await self._item(request, target, target.name, warnings)
        if request.method == "GET" and table.wants_table(request.headers.get("Accept", "")):
            meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
            return web.json_response(table.table(target.rt, [obj], meta))
        return _with_warnings(web.json_response(obj), warnings)

    async def _pod_log(self, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        rt = self.store.registry.find("", "v1", "pods")
        if rt is None:
            raise ApiError(404, "NotFound", NOT_FOUND)
        pod = self.store.get(rt, namespace, name)
        uid = pod["metadata"].get("uid")

        def current() -> Obj | None:
            found = self.store.objects(rt).get((namespace, name))
            return found if found is not None and found["metadata"].get("uid") == uid else None

        return await podlogs.serve(request, self.pod_logs, pod, current)

    async def _item(self, request: web.Request, target: RequestTarget, name: str, warnings: list[str]) -> Obj:
        rt, namespace = target.rt, target.namespace or ""
        method = request.method
        if method == "GET":
            return self.store.get(rt, namespace, name)
        if method == "PUT":
            body = await _body(request)
            warnings += _validate(rt, body, dict(request.query))
            return self.store.replace(rt, namespace, name, body, status_only=target.status)
        if method == "PATCH":
            body = await _body(request)
            if request.content_type != JSON_PATCH:  # a merge patch's unknown fields are the result's
                warnings += _validate(rt, body, dict(request.query))
            apply = _patcher(rt, request.content_type, body)
            return self.store.patch(rt, namespace, name, apply, status_only=target.status)
        if method == "DELETE" and not target.status:
            options = await _body(request, optional=True) or {}
            pre = options.get("preconditions") or {} if isinstance(options, dict) else {}
            return self.store.delete(
                rt, namespace, name, uid=pre.get("uid"), resource_version=pre.get("resourceVersion")
            )
        raise method_not_allowed(f"{method} is not supported on {rt.qualified} {name!r}")

    def _list(self, target: RequestTarget, query: dict[str, str]) -> dict[str, Any]:
        rt, store = target.rt, self.store
        label = label_selector(query.get("labelSelector"))
        field = field_selector(query.get("fieldSelector"), rt.field_labels)
        rv_param, match = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
        start: ObjectKey | None = None
        if query.get("continue"):
            list_rv, start = _decode_continue(query["continue"])
            if not store.history.covers(list_rv):
                raise ApiError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter.",
                )
        elif rv_param not in ("", "0"):
            try:
                list_rv = int(rv_param)
            except ValueError:
                raise bad_request(f"invalid resource version: {rv_param!r}") from None
            if list_rv > store.rv:
                raise ApiError(504, "Timeout", f"Too large resource version: {list_rv}, current: {store.rv}")
            if match != "Exact":
                list_rv = store.rv
        else:
            list_rv = store.rv
        state = store.objects(rt) if list_rv == store.rv else store.state_at(rt, list_rv)
        keys = sorted(k for k in state if target.namespace is None or k[0] == target.namespace)
        if start is not None:
            keys = [k for k in keys if k > start]
        keys = [k for k in keys if label(state[k]) and field(state[k])]
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise bad_request(f"invalid limit: {query['limit']!r}") from None
        if 0 < limit < len(keys):
            meta["continue"] = _encode_continue(list_rv, keys[limit - 1])
            meta["remainingItemCount"] = len(keys) - limit
            keys = keys[:limit]
        items = store.select(rt, None, lambda o: True, {k: state[k] for k in keys})
        if rt.builtin:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}


PROTOBUF = "application/vnd.kubernetes.protobuf"


def _validate(rt: ResourceType, body: Any, query: dict[str, str]) -> list[str]:
    """``fieldValidation`` (magw.kubeemu.openapi): Strict refuses unknown fields (400), Warn returns them as
    warnings, Ignore (and no parameter, for the daemons' clients) checks nothing."""
    mode = query.get("fieldValidation", "Ignore")
    if mode not in ("Strict", "Warn") or not isinstance(body, dict):
        return []
    unknown = [f'unknown field "{f}"' for f in openapi.unknown_fields(rt.schema, body)]
    if unknown and mode == "Strict":
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding error: '
            + ", ".join(unknown)
        )
    return unknown


def _with_warnings(response: web.Response, warnings: list[str]) -> web.Response:
    for w in warnings:
        response.headers.add("Warning", f'299 - "{w}"')
    return response


async def _body(request: web.Request, *, optional: bool = False) -> Any:
    raw = await request.read()
    if not raw.strip():
        if optional:
            return None
        raise bad_request("the request body is empty")
    if request.content_type == PROTOBUF:
        # kubectl sends built-in types as protobuf (and does not resend them as JSON on a 415): decode the kinds
        # it creates that way; anything else is a 415.
        try:
            return protobuf.decode(raw)
        except (UnknownProtobuf, UnicodeDecodeError):
            raise unsupported_media_type(PROTOBUF, "application/json, application/yaml") from None
    try:
        return json.loads(raw)
    except ValueError as err:
        raise bad_request(f"the request body is not JSON: {err}") from None


def _patcher(rt: ResourceType, content_type: str, patch: Any) -> Any:
    """The function that applies ``patch`` of ``content_type`` to an object (see ``magw.kubeemu.patch``)."""
    accepted = f"{JSON_PATCH}, {MERGE}" + ("" if not rt.builtin else f", {STRATEGIC}")
    if content_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        kind = "json"
    elif content_type == MERGE or (content_type == STRATEGIC and rt.builtin):
        if not isinstance(patch, dict):
            raise bad_request("a merge patch must be a JSON object")
        kind = "merge"
    else:
        raise unsupported_media_type(content_type, accepted)

    def apply(obj: Obj) -> Any:
        try:
            return json_patch(obj, patch) if kind == "json" else merge_patch(obj, patch)
        except PatchError as err:
            if err.malformed:
                raise bad_request(str(err)) from None
            raise ApiError(422, "Invalid", f"the patch could not be applied: {err}") from None

    return apply
