"""Create, replace and delete our custom objects: small async wrappers over ``CustomObjectsApi``.

Each write states what it expects, so that the API server's optimistic concurrency does the locking: a
replace carries the resourceVersion that was read (409 if someone wrote in between), a delete of an object
we judged stale carries it as a precondition. ``ensure_spec`` is the level-driven write every syncer here
uses: the object should exist with this spec (and these labels); create it, replace it, or leave it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi, V1DeleteOptions, V1Preconditions
from kubernetes_asyncio.client.exceptions import ApiException

from magw.sources.kube.resources import GROUP, VERSION

Obj = Mapping[str, Any]


@attrs.frozen
class Crd:
    """One kind of ours in one namespace of one API server."""

    api: ApiClient
    plural: str
    kind: str
    namespace: str
    group: str = GROUP
    version: str = VERSION

    @property
    def _objects(self) -> CustomObjectsApi:
        return CustomObjectsApi(self.api)

    async def get(self, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self._objects.get_namespaced_custom_object(
                self.group, self.version, self.namespace, self.plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    def body(self, name: str, spec: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if labels:
            meta["labels"] = dict(labels)
        return {"apiVersion": f"{self.group}/{self.version}", "kind": self.kind, "metadata": meta, "spec": dict(spec)}

    async def create(self, name: str, spec: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> None:
        await self._objects.create_namespaced_custom_object(
            self.group, self.version, self.namespace, self.plural, self.body(name, spec, labels)
        )

    async def replace(self, current: Obj, spec: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> None:
        """Replace ``current``'s spec (and labels), only if nobody wrote it since it was read (else 409)."""
        meta = current.get("metadata") or {}
        body = self.body(str(meta.get("name")), spec, labels if labels is not None else meta.get("labels"))
        body["metadata"]["resourceVersion"] = meta.get("resourceVersion")
        await self._objects.replace_namespaced_custom_object(
            self.group, self.version, self.namespace, self.plural, body["metadata"]["name"], body
        )

    async def delete(self, name: str, resource_version: str | None = None) -> bool:
        """Delete; False if it was already gone. With ``resource_version``, only that version (else 409)."""
        body = V1DeleteOptions(
            preconditions=V1Preconditions(resource_version=resource_version) if resource_version else None
        )
        try:
            await self._objects.delete_namespaced_custom_object(
                self.group, self.version, self.namespace, self.plural, name, body=body
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def ensure_spec(
        self, name: str, spec: Mapping[str, Any], current: Obj | None, labels: Mapping[str, str] | None = None
    ) -> str | None:
        """Make ``name`` hold ``spec``: 'created', 'replaced', or None when ``current`` already does.

        ``current`` is the object as a reflector last saw it (None: absent). A create that meets an existing
        object (409) or a replace that meets a newer one (409) raises: the caller's next pass, with a fresher
        view, decides again.
        """
        if current is None:
            await self.create(name, spec, labels)
            return "created"
        if dict(current.get("spec") or {}) == dict(spec) and (
            labels is None or dict((current.get("metadata") or {}).get("labels") or {}) == dict(labels)
        ):
            return None
        await self.replace(current, spec, labels)
        return "replaced"
