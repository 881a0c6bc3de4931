"""Where the Globalnet controller writes on Kubernetes: statuses through the status subresource, and the
GlobalIngressIPs and per-gateway ClusterGlobalEgressIPs it makes. The same methods as the file broker's
``GlobalnetStore``, so ``GlobalnetController`` runs unchanged on either.

The controller's pass runs in a worker thread and calls these methods synchronously; each one runs its
request on the daemon's event loop (``run_coroutine_threadsafe``) and waits for it, up to ``timeout``. An
API error is raised as ``OSError`` (one line), which is what the daemon retries with backoff.

- ``write_status``: a **merge patch** of ``.status`` (``status.patch_status``: kubernetes_asyncio would send
  a dict as a JSON patch otherwise). Conditions carry ``observedGeneration`` (the object's
  generation when the status was computed). The status of an object that does not exist yet (a
  GlobalIngressIP or per-gateway ClusterGlobalEgressIP the same pass creates: statuses are written before
  objects) is kept and written right after the object is created.
- ``delete_status``: our status keys are cleared (each set to null in a merge patch); the status of an
  object already gone is gone with it.
- ``write_object``: create, or replace the spec (the optimistic lock: 409 raises, the next pass decides again).
- ``delete_object``: delete (already gone is fine).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from magw.model.globalnet import (
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    ClusterGlobalEgressIP,
    GlobalIngressIP,
    GlobalIPStatus,
    ObjectRef,
)
from magw.snapshot.dump import object_to_doc, status_to_doc
from magw.sources.kube.crd import Crd
from magw.sources.kube.mapping import STATUS_KEYS
from magw.sources.kube.resources import GROUP, PLURALS, VERSION
from magw.sources.kube.status import patch_status

_T = TypeVar("_T")


def status_body(ref: ObjectRef, status: GlobalIPStatus, generation: int | None) -> dict[str, Any]:
    """The CRD status of ``status`` (the file broker's GlobalnetStatus body without ``object``)."""
    body = status_to_doc(ref, status)
    body.pop("object")
    for condition in body["conditions"]:
        if not condition.get("lastTransitionTime"):
            condition.pop("lastTransitionTime", None)
        if generation is not None:
            condition["observedGeneration"] = generation
    return body


def object_spec(obj: ClusterGlobalEgressIP | GlobalIngressIP) -> dict[str, Any]:
    """The CR spec of an object the controller makes."""
    doc = object_to_doc(obj)
    if isinstance(obj, ClusterGlobalEgressIP):
        return {"numberOfIPs": doc["numberOfIPs"]}
    spec = {"target": doc["target"], "serviceName": doc["serviceName"], "objRef": {"name": doc["targetRef"]["name"]}}
    if "targetIP" in doc:
        spec["targetIP"] = doc["targetIP"]
    return spec


class KubeGlobalnetStore:
    def __init__(
        self, api: ApiClient, loop: asyncio.AbstractEventLoop, *, cluster: str, namespace: str, timeout: float = 10.0
    ) -> None:
        self.api = api
        self.loop = loop
        self.cluster = cluster
        self.namespace = namespace  # where ClusterGlobalEgressIPs live
        self.timeout = timeout
        self._pending: dict[ObjectRef, GlobalIPStatus] = {}

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        try:
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout)
        except ApiException as exc:
            raise OSError(f"Kubernetes API: {exc.status} {exc.reason}") from None
        except TimeoutError:
            raise OSError(f"Kubernetes API: no answer within {self.timeout} s") from None

    def _namespace(self, ref: ObjectRef) -> str:
        return ref.namespace or self.namespace

    def _crd(self, ref: ObjectRef) -> Crd:
        return Crd(self.api, PLURALS[ref.kind], ref.kind, self._namespace(ref))

    async def _patch_status(self, ref: ObjectRef, status: GlobalIPStatus | None) -> bool:
        """Merge-patch the status; False when the object does not exist."""
        crd = self._crd(ref)
        current = await crd.get(ref.name)
        if current is None:
            return False
        generation = (current.get("metadata") or {}).get("generation")
        # None deletes a key in a merge patch: clearing a status is every key of ours set to None
        body = dict.fromkeys(STATUS_KEYS) if status is None else status_body(ref, status, generation)
        try:
            await patch_status(self.api, GROUP, VERSION, crd.namespace, crd.plural, ref.name, body)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def write_status(self, ref: ObjectRef, status: GlobalIPStatus) -> None:
        if self._run(self._patch_status(ref, status)):
            self._pending.pop(ref, None)
        elif ref.kind in (GLOBAL_INGRESS_IP, CLUSTER_GLOBAL_EGRESS_IP):
            self._pending[ref] = status  # an object the controller makes: it comes later in this pass
        # the status of a user's object that was deleted meanwhile: nothing to write

    def delete_status(self, ref: ObjectRef) -> bool:
        self._pending.pop(ref, None)
        return self._run(self._patch_status(ref, None))

    async def _write_object(self, ref: ObjectRef, spec: dict[str, Any]) -> None:
        crd = self._crd(ref)
        await crd.ensure_spec(ref.name, spec, await crd.get(ref.name), {"submariner.io/managed-by": "magw-globalnet"})
        pending = self._pending.pop(ref, None)
        if pending is not None:
            await self._patch_status(ref, pending)

    def write_object(self, obj: ClusterGlobalEgressIP | GlobalIngressIP) -> None:
        if isinstance(obj, GlobalIngressIP):
            ref = ObjectRef(GLOBAL_INGRESS_IP, obj.namespace, obj.name)
        else:
            ref = ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", obj.name)
        self._run(self._write_object(ref, object_spec(obj)))

    def delete_object(self, ref: ObjectRef) -> bool:
        self._pending.pop(ref, None)
        return self._run(self._crd(ref).delete(ref.name))
