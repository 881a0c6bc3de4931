"""List, then watch: one resource's objects kept in memory, as client-go's reflector does.

The rules (docs/kubernetes.md; the API's "Efficient detection of changes"):

- **List, then watch from the list's resourceVersion**, with ``allowWatchBookmarks``. A BOOKMARK only moves
  our resourceVersion on; nothing else is done with it.
- **410 Gone** (our resourceVersion was compacted away) means: list again. kubernetes_asyncio's ``Watch``
  retries a 410 once by itself with the same resourceVersion, which fails the same way, but only for a watch
  without ``timeout_seconds``; ours always passes ``timeout_seconds``, so the 410 reaches us at once and we
  relist.
- **A silent watch ends**: no event (bookmarks included) for ``inactivity`` seconds ends the watch, and a new
  one starts from the last resourceVersion. A server-side ``timeoutSeconds`` ends it too, normally.
- **One task per resource** handles its events one after the other, so events of one object are handled in
  order.
- **Nothing is pruned before a list completes.** The store is replaced only by a *complete* list (the old
  view stays in use while a relist runs or fails), and ``synced`` turns True only after the first one. A
  consumer that prunes only once every input is synced (the reconciler's ``inputs_synced``) therefore never
  prunes on a partial view.
- **Errors never end the loop**: a failed list or watch (API server down, connection dropped, 5xx) is
  logged once per change of state and retried with capped exponential backoff (``BACKOFF_FIRST`` doubling to
  ``BACKOFF_MAX``); the store keeps the last view meanwhile, so nothing is flushed.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import aiohttp
import attrs
import structlog
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.watch import Watch

log = structlog.get_logger(__name__)

Obj = Mapping[str, Any]
Key = tuple[str, str]  # namespace ("" if cluster-scoped), name
ListFunction = Callable[..., Any]

BACKOFF_FIRST = 0.2
BACKOFF_MAX = 10.0
# What a request to an API server can end with besides an answer: the daemons log these and retry.
API_ERRORS: tuple[type[BaseException], ...] = (ApiException, aiohttp.ClientError, OSError, TimeoutError)
_RETRIED: tuple[type[BaseException], ...] = (*API_ERRORS, ValueError)  # ValueError: a body that is not JSON
_MAX_PAGES = 100_000  # a server whose continue tokens never end (a bug) must not keep one list going forever


class Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class _PlainObjects:
    """What ``Watch`` asks of its client when events are plain objects (``return_type="object"``): the event's
    object parsed from JSON, as ``ApiClient.deserialize`` does for "object"; and a close that has nothing to do."""

    @staticmethod
    def deserialize(response: Any, response_type: str) -> Any:
        return json.loads(response.data)

    async def close(self) -> None:
        return None


class PlainWatch(Watch):
    """kubernetes_asyncio's ``Watch`` without the ``ApiClient`` its ``__init__`` builds for every watch.

    Shaped for speed (profiled): that client's REST client makes an SSL context and loads the system's CA
    bundle, 137 ms of CPU on the event loop here, for every watch of every kind. A dropped connection restarts
    a route agent's 13 watches at once: 1.8 s with its loop blocked, longer than the liveness set's 1 s lease,
    so every peer called the node's gateways down (the kube soak's ``watch-drop``, docs/robustness.md). Our
    events are plain objects, for which the client only parses JSON (``_PlainObjects``). ``__init__`` sets
    exactly the attributes ``Watch.__init__`` sets (a test compares them), without calling it.
    """

    def __init__(self) -> None:  # no super().__init__(): its ApiClient is what this class avoids
        self._raw_return_type = "object"
        self._stop = False
        self._api_client = _PlainObjects()  # type: ignore[assignment]  # the part of ApiClient a Watch uses
        self.resource_version = None
        self.resp = None


@attrs.frozen(kw_only=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, or SYNCED after a complete list
    key: Key
    obj: Obj | None


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def resource_version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


@attrs.frozen(kw_only=True)
class Timing:
    """How long watches and lists may take (tests and the lab shorten them)."""

    watch_timeout: float = 300.0  # the server ends each watch after about this long (with jitter)
    inactivity: float = 90.0  # no event, bookmark included, for this long: end the watch ourselves
    request_timeout: float = 60.0  # a list page that takes longer than this failed
    page: int = 500  # objects per list page (``limit``), as client-go's pager asks


DEFAULT_TIMING = Timing()


@attrs.define
class Reflector:
    """Keeps ``objects`` equal to the API's view of one resource.

    ``list_fn`` is a kubernetes_asyncio list method (``CoreV1Api.list_node``,
    ``CustomObjectsApi.list_namespaced_custom_object``...) and ``args``/``kwargs`` its arguments;
    ``on_change(events)`` is called on the loop after each complete list (one ``SYNCED`` event) and after each
    watch event.
    """

    kind: str
    list_fn: ListFunction
    on_change: Callable[[list[WatchEvent]], None]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)
    timing: Timing = DEFAULT_TIMING
    objects: dict[Key, Obj] = attrs.field(init=False, factory=dict)
    synced: bool = attrs.field(init=False, default=False)
    resource_version: str = attrs.field(init=False, default="")
    lists: int = attrs.field(init=False, default=0)
    relists_after_gone: int = attrs.field(init=False, default=0)
    _failing: str | None = attrs.field(init=False, default=None)
    _stop: asyncio.Event = attrs.field(init=False, factory=asyncio.Event)

    def stop(self) -> None:
        self._stop.set()

    async def _list(self) -> None:
        """One complete list, a page of ``timing.page`` objects at a time (``limit`` and ``continue``): the loop,
        which carries the health probes, decodes one page at a time instead of 100k objects at once. The
        pages are one consistent state (the first page's resourceVersion); an expired continue token is a
        410, and the list starts again. Nothing changes before the last page is in."""
        objects: dict[Key, Obj] = {}
        token, version, pages = "", "", 0
        while True:
            body = await self._page(token)
            pages += 1
            for item in body["items"]:
                objects[key_of(item)] = item
            meta = body.get("metadata") or {}
            version = str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            if not token:
                break
            if pages >= _MAX_PAGES:
                raise ApiException(status=0, reason=f"the list did not end after {pages} pages")
        # Swapped in as a whole, only now: a list that failed half-way changed nothing.
        self.objects = objects
        self.resource_version = version
        self.synced = True
        self.lists += 1
        self.on_change([WatchEvent(type="SYNCED", key=("", ""), obj=None)])

    async def _page(self, token: str) -> dict[str, Any]:
        paging: dict[str, Any] = {"limit": self.timing.page}
        if token:
            paging["_continue"] = token
        response = await self.list_fn(
            *self.args,
            **self.kwargs,
            **paging,
            _preload_content=False,
            _request_timeout=self.timing.request_timeout,
        )
        try:
            raw = await response.read()
            # With _preload_content=False kubernetes_asyncio does not raise for an error status: an error's
            # Status object would read as a list without items, that is an empty resource, and prune all.
            if response.status >= 400:
                raise ApiException(status=response.status, reason=raw.decode("utf-8", "replace")[:300])
            body = json.loads(raw)
        finally:
            response.release()
        if not isinstance(body, dict) or body.get("kind") == "Status" or not isinstance(body.get("items", []), list):
            raise ApiException(status=0, reason=f"not a list: {str(body)[:200]}")
        body["items"] = body.get("items") or []
        return body

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = str(event.get("type"))
        obj = event.get("raw_object") or event.get("object")
        if not isinstance(obj, Mapping):
            return
        if kind == "BOOKMARK":
            self.resource_version = resource_version(obj) or self.resource_version
            return
        key = key_of(obj)
        if kind == "DELETED":
            self.objects.pop(key, None)
        elif kind in ("ADDED", "MODIFIED"):
            self.objects[key] = obj
        else:
            log.warning("kube.watch_unknown_event", kind=self.kind, type=kind)
            return
        self.resource_version = resource_version(obj) or self.resource_version
        self.on_change([WatchEvent(type=kind, key=key, obj=obj if kind != "DELETED" else None)])

    async def _watch(self) -> None:
        """One watch from ``resource_version`` until it ends (timeout, inactivity); raises Gone on 410."""
        timeout = int(self.timing.watch_timeout * random.uniform(0.8, 1.0)) or 1  # spread relists of many agents
        watch = PlainWatch()  # events as plain dicts, like the list's items
        stream = watch.stream(
            self.list_fn,
            *self.args,
            **self.kwargs,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
        )
        try:
            while not self._stop.is_set():
                try:
                    async with asyncio.timeout(self.timing.inactivity):
                        event = await stream.__anext__()
                except StopAsyncIteration:
                    return  # the server ended the watch (timeoutSeconds): watch again
                except TimeoutError:
                    log.info("kube.watch_inactive", kind=self.kind, seconds=self.timing.inactivity)
                    return
                self._apply(event)
                self._recovered()
        except ApiException as exc:
            if exc.status == 410:
                raise Gone(str(exc.reason)) from None
            raise
        finally:
            await watch.close()

    def _failed(self, what: str, exc: BaseException, retry_in: float) -> None:
        state = f"{what}: {type(exc).__name__}: {exc}".splitlines()[0][:300]
        if state != self._failing:
            log.warning("kube.api_error", kind=self.kind, error=state, retry_in=round(retry_in, 2), synced=self.synced)
        self._failing = state

    def _recovered(self) -> None:
        if self._failing is not None:
            log.info("kube.api_recovered", kind=self.kind, resource_version=self.resource_version)
            self._failing = None

    async def run(self) -> None:
        """List and watch until ``stop()``; never raises for API errors."""
        backoff = BACKOFF_FIRST
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    self._recovered()
                await self._watch()
                backoff = BACKOFF_FIRST
            except Gone as exc:
                self.relists_after_gone += 1
                log.info("kube.relist", kind=self.kind, reason="410 Gone", detail=str(exc)[:200])
                need_list = True
            except _RETRIED as exc:
                self._failed("list" if need_list else "watch", exc, backoff)
                await self._sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    async def _sleep(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._stop.wait()
        except TimeoutError:
            pass


async def stop_all(reflectors: Iterable[Reflector], tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Stop ``reflectors`` and wait for ``tasks`` (their runs and the caller's helpers) to end."""
    for reflector in reflectors:
        reflector.stop()
    pending = list(tasks)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
