"""Where the egress controller writes on Kubernetes: EgressVIP statuses (status subresource) and the bindings
the API changes (the CR's spec). The same methods as the file broker's ``EgressStore`` (``EgressWriter``), so
``EgressController`` runs unchanged on either.

The controller calls its writer synchronously, on the event loop that also runs the ``KubeSource`` and the
HTTP API. A request cannot be awaited there, so the writes go through an ``ApiThread``: a thread with an event
loop and an ``ApiClient`` of its own; a write blocks the caller until the API answers, at most ``timeout``
seconds (as the file store blocks on fsync). An API error is raised as ``OSError`` (the API answers 500, the
pass is retried); a 409 on a binding change (the VIP was changed since the controller read it) is
``StoreRefused`` (the API answers 409: ask again).

- ``write_status``: a **merge patch** of ``.status`` (``holder``, ``since``, ``services``, ``conflicts``; an
  empty ``since`` is removed: the CRD's ``date-time`` refuses "", and so are empty ``conflicts``). A VIP that
  is gone has no status to write: nothing happens.
- ``delete_status``: the keys set to null; True if the object was there.
- ``write_vip``: a merge patch of ``spec.bindings`` (the only field the API changes), with the resourceVersion
  the source last saw as a precondition.

Read-your-writes: the watch brings a write back a moment later, but the controller reads its snapshot again
right after writing (an API answer carries the new status). ``written`` keeps what was written, per VIP, with
the resourceVersion the API returned, until the source has seen that version (or ``hold`` seconds passed);
``KubeEgressView`` lays it over the source's snapshot.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import attrs
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from magw.model.egressgw import EgressVIP, EgressVIPStatus
from magw.snapshot.egressgw import vip_to_doc
from magw.sources.file.egressgw_store import StoreRefused
from magw.sources.kube.client import api_client
from magw.sources.kube.resources import EGRESSGW_VERSION, GROUP
from magw.sources.kube.status import MERGE_PATCH, patch_status

_T = TypeVar("_T")
PLURAL = "egressvips"


class ApiThread:
    """An event loop in a thread of its own with an ``ApiClient`` for ``kubeconfig`` (None: in-cluster), so that
    synchronous code on another loop can make API requests. ``close()`` ends both."""

    def __init__(self, kubeconfig: str | os.PathLike[str] | None, *, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="magw-egress-api", daemon=True)
        self._thread.start()
        try:
            self.api: ApiClient = self.run(api_client(kubeconfig))
        except BaseException:
            self._stop_loop()
            raise

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the thread's loop and wait for it, at most ``timeout`` seconds."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise OSError(f"Kubernetes API: no answer within {self.timeout} s") from None

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()

    def close(self) -> None:
        try:
            self.run(self.api.close())
        finally:
            self._stop_loop()


@attrs.frozen(kw_only=True)
class Written:
    """What this process wrote to one EgressVIP, and the resourceVersion the API gave it."""

    vip: EgressVIP | None = None
    status: EgressVIPStatus | None = None
    status_deleted: bool = False
    resource_version: str = ""
    at: float = 0.0


def _rv(obj: Any) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def status_body(status: EgressVIPStatus) -> dict[str, Any]:
    """The CR's status of ``status``: ``since`` and ``conflicts`` null (removed) when empty."""
    return {
        "holder": status.holder,
        "since": status.since or None,
        "services": list(status.services),
        "conflicts": list(status.conflicts) or None,
    }


class KubeEgressStore:
    """The egress controller's writes into the EgressVIP CRs of ``namespace``.

    ``seen(name)`` is the resourceVersion of the VIP's object as the source last saw it (the precondition of a
    binding change; "" skips it)."""

    def __init__(
        self,
        thread: ApiThread,
        *,
        namespace: str,
        seen: Callable[[str], str] = lambda _name: "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.thread = thread
        self.namespace = namespace
        self._seen = seen
        self._clock = clock
        self.written: dict[str, Written] = {}

    def _custom(self) -> Any:  # Any: the package's stub omits _content_type, which the code takes
        return CustomObjectsApi(self.thread.api)

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        try:
            return self.thread.run(coro)
        except ApiException as exc:
            raise OSError(f"Kubernetes API: {exc.status} {exc.reason}") from None

    def _remember(self, name: str, obj: Any, **changes: Any) -> None:
        before = self.written.get(name, Written())
        self.written[name] = attrs.evolve(before, resource_version=_rv(obj), at=self._clock(), **changes)

    async def _patch_status(self, name: str, body: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return await patch_status(self.thread.api, GROUP, EGRESSGW_VERSION, self.namespace, PLURAL, name, body)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def write_status(self, name: str, status: EgressVIPStatus) -> None:
        obj = self._call(self._patch_status(name, status_body(status)))
        if obj is not None:
            self._remember(name, obj, status=status, status_deleted=False)

    def delete_status(self, name: str) -> bool:
        obj = self._call(self._patch_status(name, dict.fromkeys(("holder", "since", "services", "conflicts"))))
        if obj is None:
            return False
        self._remember(name, obj, status=None, status_deleted=True)
        return True

    def vip_file(self, name: str) -> Path:
        """What logs name as the VIP's "file": the object (nothing refuses a write here)."""
        return Path(PLURAL) / self.namespace / name

    async def _patch_vip(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self._custom().patch_namespaced_custom_object(
            GROUP, EGRESSGW_VERSION, self.namespace, PLURAL, name, body, _content_type=MERGE_PATCH
        )
        return result

    def write_vip(self, vip: EgressVIP) -> Path:
        body: dict[str, Any] = {"spec": {"bindings": vip_to_doc(vip)["bindings"]}}
        seen = self._seen(vip.name)
        if seen:
            body["metadata"] = {"resourceVersion": seen}
        try:
            obj = self.thread.run(self._patch_vip(vip.name, body))
        except ApiException as exc:
            if exc.status == 409:
                raise StoreRefused(f"VIP {vip.name} was changed meanwhile: ask again") from None
            if exc.status == 404:
                raise StoreRefused(f"VIP {vip.name}: its EgressVIP object is gone") from None
            raise OSError(f"Kubernetes API: {exc.status} {exc.reason}") from None
        self._remember(vip.name, obj, vip=vip)
        return self.vip_file(vip.name)
