"""Watch streams: ``?watch=true`` answers 200 and a chunked body of newline-delimited JSON events.

Semantics (API Concepts, "Efficient detection of changes", "Watch bookmarks", "410 Gone"):

- from a resourceVersion R: every change after R, in resourceVersion order, then live changes; from no
  resourceVersion or "0": a synthetic ADDED for every current object first, then the changes after now;
- R older than the compaction horizon: 200 with a single ERROR event whose object is a Status, code 410, reason
  Expired (what real servers send for a watch; a list answers the 410 as the HTTP status), then the end;
- label and field selectors filter as the watch cache does: an object that starts matching is ADDED, one that
  stops matching is DELETED (with the old object at the new resourceVersion);
- ``allowWatchBookmarks=true``: BOOKMARK events (only kind, apiVersion and metadata.resourceVersion) every
  ``WatchHub.bookmark_interval`` seconds; every change up to a bookmark's resourceVersion was sent before it;
- ``sendInitialEvents=true`` (the streaming list): the current objects as ADDED, then a BOOKMARK annotated
  ``k8s.io/initial-events-end: "true"``;
- ``timeoutSeconds`` ends the stream cleanly after that long; without it the server's own limit applies.

A watcher whose client does not keep up (more than ``limit`` queued events) is closed, as a real server closes
a slow watcher; the client re-watches from its last resourceVersion. ``WatchHub.drop()`` closes every stream
abruptly (no final chunk: the client sees a broken response), ``WatchHub.finish()`` ends them cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from magw.kubeemu import table
from magw.kubeemu.errors import ApiError, bad_request, status_object
from magw.kubeemu.history import HistoryEvent
from magw.kubeemu.resources import ResourceType
from magw.kubeemu.selectors import field_selector, label_selector
from magw.kubeemu.store import Store

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Watcher:
    def __init__(
        self, rt: ResourceType, namespace: str | None, match: Callable[[Mapping[str, Any]], bool], limit: int
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.match = match
        self.limit = limit
        self.queue: deque[tuple[str, Mapping[str, Any]]] = deque()
        self.wake = asyncio.Event()
        self.ended: str | None = None  # "finish", "abort" or "overflow"
        self.live = False
        self.as_table = False  # kubectl get -w: each object as a one-row Table (magw.kubeemu.table)
        self.columns_sent = False

    def offer(self, ev: HistoryEvent) -> None:
        """Take one change (the store calls this synchronously for every write)."""
        if ev.type_key != self.rt.key or (self.namespace is not None and ev.key[0] != self.namespace):
            return
        now = ev.type != "DELETED" and self.match(ev.obj)
        before = ev.prev is not None and self.match(ev.prev)
        if now:
            self.queue.append(("MODIFIED" if before else "ADDED", ev.obj))
        elif before:
            if ev.type == "DELETED":
                self.queue.append(("DELETED", ev.obj))
            else:
                assert ev.prev is not None
                old = dict(ev.prev)
                old["metadata"] = {**ev.prev["metadata"], "resourceVersion": str(ev.rv)}
                self.queue.append(("DELETED", old))
        else:
            return
        if self.live and len(self.queue) > self.limit:
            self.end("overflow")
        self.wake.set()

    def end(self, how: str) -> None:
        if self.ended is None:
            self.ended = how
        self.wake.set()


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def _line(kind: str, obj: Mapping[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _event(w: Watcher, kind: str, obj: Mapping[str, Any]) -> bytes:
    """An event for ``w``: as a Table when it asked for one; only the first carries the column definitions, as
    a real server's watch does."""
    if not w.as_table:
        return _line(kind, obj)
    one = table.table(w.rt, [obj], {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")})
    if w.columns_sent:
        one["columnDefinitions"] = []
    w.columns_sent = True
    return _line(kind, one)


class WatchHub:
    """Serves watch requests and keeps the open ones, for ``drop()``/``finish()`` and a clean stop."""

    def __init__(self, store: Store, *, bookmark_interval: float = 60.0, max_timeout: float = 1800.0) -> None:
        self.store = store
        self.bookmark_interval = bookmark_interval
        self.max_timeout = max_timeout
        self.queue_limit = 10_000
        self.active: set[Watcher] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def drop(self) -> int:
        """Close every open watch connection abruptly; returns how many."""
        for w in self.active:
            w.end("abort")
        return len(self.active)

    def finish(self) -> int:
        """End every open watch cleanly (the final chunk is sent), as a server shutting down does."""
        for w in self.active:
            w.end("finish")
        return len(self.active)

    async def wait_idle(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _bookmark(self, rt: ResourceType, *, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return _line("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})

    def _open(self, rt: ResourceType, namespace: str | None, query: Mapping[str, str]) -> tuple[Watcher, bytes]:
        """Register a watcher and queue its first events in one synchronous step (no change can slip between);
        returns the watcher and the bytes that go before its queue (an ERROR event for an expired version)."""
        label = label_selector(query.get("labelSelector"))
        field = field_selector(query.get("fieldSelector"), rt.field_labels)
        w = Watcher(rt, namespace, lambda o: label(o) and field(o), self.queue_limit)
        rv_param = query.get("resourceVersion", "")
        first = b""
        if _flag(query, "sendInitialEvents") and (
            query.get("resourceVersionMatch") != "NotOlderThan" or not _flag(query, "allowWatchBookmarks")
        ):
            raise ApiError(
                422,
                "Invalid",
                "sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
            )
        if rv_param in ("", "0") or _flag(query, "sendInitialEvents"):
            for obj in self.store.select(rt, namespace, w.match):
                w.queue.append(("ADDED", obj))
            if _flag(query, "sendInitialEvents"):
                w.queue.append(("BOOKMARK-END", {}))
        else:
            try:
                rv = int(rv_param)
            except ValueError:
                raise bad_request(f"invalid resource version: {rv_param!r}") from None
            if not self.store.history.covers(rv):
                message = f"too old resource version: {rv} ({self.store.history.horizon + 1})"
                w.end("finish")
                return w, _line("ERROR", status_object(410, "Expired", message))
            for ev in self.store.history.since(rv):
                w.offer(ev)
        w.live = True
        return w, first

    async def serve(
        self, request: web.Request, rt: ResourceType, namespace: str | None, query: Mapping[str, str]
    ) -> web.StreamResponse:
        try:
            timeout = float(query["timeoutSeconds"]) if "timeoutSeconds" in query else self.max_timeout
        except ValueError:
            raise bad_request(f"invalid timeoutSeconds: {query['timeoutSeconds']!r}") from None
        bookmarks = _flag(query, "allowWatchBookmarks")
        w, first = self._open(rt, namespace, query)  # may raise a 400 before anything is sent
        w.as_table = table.wants_table(request.headers.get("Accept", ""))
        if w.ended is None:
            self.store.subscribe(w)
        self.active.add(w)
        self._idle.clear()
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        try:
            await resp.prepare(request)
            if first:
                await resp.write(first)
            await self._pump(request, resp, w, rt, timeout, bookmarks)
            if w.ended in ("abort", "overflow"):
                if request.transport is not None:
                    request.transport.abort()
                return resp
            await resp.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client went away (or the connection was aborted): nothing to finish
        finally:
            self.store.unsubscribe(w)
            self.active.discard(w)
            if not self.active:
                self._idle.set()
        return resp

    async def _pump(
        self, request: web.Request, resp: web.StreamResponse, w: Watcher, rt: ResourceType, timeout: float, bm: bool
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        next_bookmark = loop.time() + self.bookmark_interval
        while True:
            if w.queue and w.ended != "abort":
                chunk = []
                while w.queue:
                    kind, obj = w.queue.popleft()
                    end = kind == "BOOKMARK-END"
                    chunk.append(self._bookmark(rt, initial_end=True) if end else _event(w, kind, obj))
                await resp.write(b"".join(chunk))
                continue
            if w.ended is not None:
                return
            transport = request.transport
            if transport is None or transport.is_closing():
                w.end("abort")
                return
            now = loop.time()
            if now >= deadline:
                return
            if bm and now >= next_bookmark:
                # The queue is empty and the store fans out synchronously: every change up to store.rv is sent.
                await resp.write(self._bookmark(rt))
                next_bookmark = now + self.bookmark_interval
                continue
            until = min(deadline, next_bookmark) if bm else deadline
            w.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(w.wake.wait(), min(until - now, 1.0))
