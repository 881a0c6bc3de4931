"""The emulator's etcd: objects, one global increasing resourceVersion, the change history and its watchers.

Every write takes the next resourceVersion (one counter for all types, as etcd's revision), stamps it on the
object, records a ``HistoryEvent`` and hands it to every subscribed watcher in the same step, so watchers see the
changes in resourceVersion order and none is lost between a list and a watch from the list's resourceVersion
("Efficient detection of changes" in API Concepts). Operations are synchronous: the server runs on one event
loop, so a write and its fan-out are atomic.

Object semantics (API Concepts "Resource versions", "Conflicts", "Status subresource"; the generic registry):

- create: name (or generateName), uid, creationTimestamp, generation 1; a resourceVersion in the body is a 400;
  the status is dropped unless the type keeps it (Nodes); 409 AlreadyExists.
- update (PUT and PATCH): a given metadata.resourceVersion must be the current one, else 409 Conflict; a PUT
  without one is allowed only for types that allow unconditional updates. uid, creationTimestamp, name and
  namespace cannot change. Types with a status subresource keep ``.status`` on main-resource writes, and
  ``/status`` writes change nothing but ``.status``. generation goes up when anything but metadata and status
  changes. A write that changes nothing is a no-op: same resourceVersion, no event.
- delete: preconditions (uid, resourceVersion) checked, 409 when they do not hold; the returned object and the
  DELETED event carry the deletion's resourceVersion. No finalizers, no graceful deletion.
"""

from __future__ import annotations

import copy
import secrets
import string
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from magw.kubeemu.errors import STALE, ApiError, already_exists, bad_request, conflict, invalid, not_found
from magw.kubeemu.history import History, HistoryEvent, Obj, ObjectKey, TypeKey
from magw.kubeemu.resources import Registry, ResourceType


class Subscriber(Protocol):
    def offer(self, ev: HistoryEvent) -> None: ...


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What generation counts: everything but metadata, status, kind and apiVersion."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


class Store:
    def __init__(self, registry: Registry | None = None, *, history_limit: int = 100_000) -> None:
        self.registry = registry or Registry()
        self.history = History(history_limit)
        self.rv = 1
        self._objects: dict[TypeKey, dict[ObjectKey, Obj]] = {}
        self._subscribers: set[Subscriber] = set()

    # --- reads -------------------------------------------------------------------------------------------------

    def objects(self, rt: ResourceType) -> dict[ObjectKey, Obj]:
        """The live map of one type (callers must not modify it or its objects)."""
        return self._objects.setdefault(rt.key, {})

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.objects(rt).get((namespace, name))
        if obj is None:
            raise not_found(rt, name)
        return copy.deepcopy(obj)

    def select(
        self,
        rt: ResourceType,
        namespace: str | None,
        match: Callable[[Mapping[str, Any]], bool],
        state: Mapping[ObjectKey, Obj] | None = None,
    ) -> list[Obj]:
        """Matching objects of ``state`` (default: now), in (namespace, name) order, as copies."""
        objects = self.objects(rt) if state is None else state
        keys = sorted(k for k in objects if namespace is None or k[0] == namespace)
        return [copy.deepcopy(objects[k]) for k in keys if match(objects[k])]

    def state_at(self, rt: ResourceType, rv: int) -> Mapping[ObjectKey, Obj]:
        """The objects of ``rt`` at resourceVersion ``rv`` (410 when compacted away)."""
        if not self.history.covers(rv):
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.history.horizon})")
        return self.history.state_at(rt.key, self.objects(rt), rv)

    # --- watchers ----------------------------------------------------------------------------------------------

    def subscribe(self, sub: Subscriber) -> None:
        self._subscribers.add(sub)

    def unsubscribe(self, sub: Subscriber) -> None:
        self._subscribers.discard(sub)

    def _record(self, ev: HistoryEvent) -> None:
        self.history.append(ev)
        for sub in list(self._subscribers):
            sub.offer(ev)

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def compact(self) -> int:
        """Forget the history up to now: reads and watches from an older resourceVersion get 410."""
        self.history.compact(self.rv)
        return self.rv

    # --- writes ------------------------------------------------------------------------------------------------

    def _check_identity(self, rt: ResourceType, body: Any, namespace: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if body.get("kind", rt.kind) != rt.kind or body.get("apiVersion", rt.api_version) != rt.api_version:
            raise bad_request(
                f"the API version in the data ({body.get('apiVersion')}) and kind ({body.get('kind')}) do not "
                f"match {rt.api_version} {rt.kind}"
            )
        body["kind"], body["apiVersion"] = rt.kind, rt.api_version
        if rt.namespaced:
            if meta.get("namespace", namespace) != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return meta

    def create(self, rt: ResourceType, namespace: str, body: Any, *, keep_status: bool = False) -> Obj:
        body = copy.deepcopy(body)
        meta = self._check_identity(rt, body, namespace)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(rt, "", "metadata.name: Required value: name or generateName is required")
            meta["name"] = prefix + "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
        name = meta["name"]
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        if (namespace, name) in self.objects(rt):
            raise already_exists(rt, name)
        if rt.status and not (keep_status or rt.keep_status_on_create):
            body.pop("status", None)
        # A load (a restored etcd) keeps what identifies the object: its uid and creation time.
        meta["uid"] = (keep_status and meta.get("uid")) or str(uuid.uuid4())
        meta["creationTimestamp"] = (keep_status and meta.get("creationTimestamp")) or _now()
        meta["generation"] = 1
        meta["resourceVersion"] = str(self._next_rv())
        self.objects(rt)[(namespace, name)] = body
        self._record(HistoryEvent(self.rv, "ADDED", rt.key, (namespace, name), body, None))
        return copy.deepcopy(body)

    def _current(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        old = self.objects(rt).get((namespace, name))
        if old is None:
            raise not_found(rt, name)
        return old

    def replace(self, rt: ResourceType, namespace: str, name: str, body: Any, *, status_only: bool = False) -> Obj:
        """PUT of the object (or of its ``/status``): optimistic concurrency on metadata.resourceVersion."""
        body = copy.deepcopy(body)
        meta = self._check_identity(rt, body, namespace)
        if meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        old = self._current(rt, namespace, name)
        given = meta.get("resourceVersion")
        if not given and not rt.unconditional_update:
            raise invalid(rt, name, "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update")
        return self._update(rt, old, body, status_only=status_only)

    def patch(
        self, rt: ResourceType, namespace: str, name: str, apply: Callable[[Obj], Any], *, status_only: bool = False
    ) -> Obj:
        """PATCH: ``apply`` turns a copy of the current object into the new one; a stale resourceVersion in the
        result (the patch carried one) is a 409 like a PUT's."""
        old = self._current(rt, namespace, name)
        new = apply(copy.deepcopy(old))
        meta = self._check_identity(rt, new, namespace)
        if meta.get("name") != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        return self._update(rt, old, new, status_only=status_only)

    def _update(self, rt: ResourceType, old: Obj, new: Obj, *, status_only: bool) -> Obj:
        meta, old_meta = new["metadata"], old["metadata"]
        name = old_meta["name"]
        given = meta.get("resourceVersion")
        if given and given != old_meta["resourceVersion"]:
            raise conflict(rt, name, STALE)
        uid = meta.get("uid")
        if uid and uid != old_meta.get("uid"):  # a body for an earlier object of the same name, as a server refuses it
            raise conflict(rt, name, f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                                     f"{old_meta.get('uid')}")  # fmt: skip
        if status_only:
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            result = new
            if rt.status:
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
            for fixed in ("uid", "creationTimestamp", "name", "namespace", "generation", "resourceVersion"):
                if fixed in old_meta:
                    meta[fixed] = old_meta[fixed]
                else:
                    meta.pop(fixed, None)
            if _content(result) != _content(old):
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if result == old:
            return copy.deepcopy(old)
        result["metadata"]["resourceVersion"] = str(self._next_rv())
        key = (old_meta.get("namespace", ""), name)
        self.objects(rt)[key] = result
        self._record(HistoryEvent(self.rv, "MODIFIED", rt.key, key, result, old))
        return copy.deepcopy(result)

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> Obj:
        old = self._current(rt, namespace, name)
        meta = old["metadata"]
        if uid and uid != meta["uid"]:
            raise conflict(
                rt, name, f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta['uid']}"
            )
        if resource_version and resource_version != meta["resourceVersion"]:
            raise conflict(
                rt,
                name,
                f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self._next_rv())
        del self.objects(rt)[(namespace, name)]
        self._record(HistoryEvent(self.rv, "DELETED", rt.key, (namespace, name), gone, old))
        return copy.deepcopy(gone)

    # --- state as a whole --------------------------------------------------------------------------------------

    def load(self, objects: Iterable[Mapping[str, Any]]) -> int:
        """Add objects as they are, status included (a restored etcd, or a test's fixture state); returns how many.

        Each needs apiVersion, kind and metadata.name (and metadata.namespace when namespaced) of a served type.
        They become ADDED events like creates."""
        count = 0
        for raw in objects:
            rt = self.registry.by_kind(str(raw.get("apiVersion")), str(raw.get("kind")))
            if rt is None:
                raise ValueError(f"no served type for apiVersion {raw.get('apiVersion')!r} kind {raw.get('kind')!r}")
            body = copy.deepcopy(dict(raw))
            meta = body.setdefault("metadata", {})
            meta.pop("resourceVersion", None)
            namespace = str(meta.get("namespace", "")) if rt.namespaced else ""
            if rt.namespaced and not namespace:
                raise ValueError(f"{rt.kind} {meta.get('name')!r}: a namespaced object needs metadata.namespace")
            self.create(rt, namespace, body, keep_status=True)
            count += 1
        return count

    def dump(self) -> list[Obj]:
        """Every object (for ``--state`` round trips and debugging), by type then (namespace, name)."""
        out: list[Obj] = []
        for type_key in sorted(self._objects):
            objects = self._objects[type_key]
            out.extend(copy.deepcopy(objects[k]) for k in sorted(objects))
        return out
