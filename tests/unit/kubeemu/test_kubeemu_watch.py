"""Watches on the emulator through kubernetes-asyncio's ``watch.Watch``.

Pinned to "API Concepts" (https://kubernetes.io/docs/reference/using-api/api-concepts/): "Efficient detection
of changes", "Watch bookmarks", "Resource versions" and "410 Gone".
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiException, CoreV1Api, CustomObjectsApi

from magw.kubeemu import Emulator
from tests.support import kubeemu_fixtures
from tests.support.kubeemu_fixtures import NAMESPACE

kube, kube_env = kubeemu_fixtures.kube, kubeemu_fixtures.kube_env  # the fixtures, by name

Kube = tuple[Emulator, Any]


async def _collect(stream: watch.Watch, n: int | None = None, timeout: float = 5.0) -> list[tuple[str, str, str]]:
    """(type, name, resourceVersion) of the stream's events until it ends (or ``n`` events)."""
    out: list[tuple[str, str, str]] = []

    async def run() -> None:
        async for ev in stream:
            raw = ev["raw_object"]
            out.append((ev["type"], raw["metadata"].get("name", ""), raw["metadata"]["resourceVersion"]))
            if n is not None and len(out) >= n:
                stream.stop()
                break

    try:
        await asyncio.wait_for(run(), timeout)
    finally:
        await stream.close()
    return out


async def _later(delay: float, action: Callable[[], Awaitable[Any]]) -> Any:
    await asyncio.sleep(delay)
    return await action()


async def test_list_then_watch_from_its_version_sees_exactly_the_later_changes_in_order(kube: Kube) -> None:
    """ "Efficient detection of changes": list, then watch from the list's resourceVersion: every change after
    the list and none before it, in order, ADDED/MODIFIED/DELETED, each with its own increasing version."""
    _, client = kube
    core = CoreV1Api(client)
    await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "before"}})
    listed = await core.list_namespaced_config_map(NAMESPACE)

    async def changes() -> None:
        await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "a"}, "data": {"k": "1"}})
        await core.patch_namespaced_config_map("a", NAMESPACE, {"data": {"k": "2"}})
        await core.create_namespaced_config_map("elsewhere", {"metadata": {"name": "other-ns"}})
        await core.delete_namespaced_config_map("before", NAMESPACE)
        await core.delete_namespaced_config_map("a", NAMESPACE)

    await changes()  # all before the watch starts: they come from the history
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, NAMESPACE, resource_version=listed.metadata.resource_version, timeout_seconds=1
    )
    events = await _collect(stream)
    assert [(t, n) for t, n, _ in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "before"),
        ("DELETED", "a"),
    ]
    rvs = [int(rv) for _, _, rv in events]
    assert rvs == sorted(rvs) and rvs[0] > int(listed.metadata.resource_version)


async def test_live_changes_arrive_while_watching(kube: Kube) -> None:
    """A watch stays open and delivers changes as they happen (newline-delimited JSON over a chunked 200)."""
    _, client = kube
    core = CoreV1Api(client)
    listed = await core.list_namespaced_config_map(NAMESPACE)
    writer = asyncio.create_task(
        _later(0.1, lambda: core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "live"}}))
    )
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, NAMESPACE, resource_version=listed.metadata.resource_version, timeout_seconds=5
    )
    events = await _collect(stream, n=1)
    await writer
    assert [(t, n) for t, n, _ in events] == [("ADDED", "live")]


async def test_watch_without_version_starts_with_synthetic_added_for_current_objects(kube: Kube) -> None:
    """ "Resource versions" (semantics for watch): unset or "0" means "get state and start at most recent":
    a synthetic ADDED per existing object, then the changes after it."""
    _, client = kube
    custom = CustomObjectsApi(client)
    args = ("submariner.io", "v1", NAMESPACE, "clusters")
    for name in ("east", "west"):
        body = {"apiVersion": "submariner.io/v1", "kind": "Cluster", "metadata": {"name": name}, "spec": {}}
        await custom.create_namespaced_custom_object(*args, body)
    await custom.delete_namespaced_custom_object(*args, "west")
    for version in (None, "0"):
        kwargs: dict[str, Any] = {"timeout_seconds": 1}
        if version is not None:
            kwargs["resource_version"] = version
        events = await _collect(watch.Watch().stream(custom.list_namespaced_custom_object, *args, **kwargs))
        assert [(t, n) for t, n, _ in events] == [("ADDED", "east")]


async def test_timeout_seconds_ends_the_stream(kube: Kube) -> None:
    """``timeoutSeconds`` on a watch: the server ends the stream after that long (the client's iteration stops)."""
    _, client = kube
    core = CoreV1Api(client)
    start = time.monotonic()
    events = await _collect(watch.Watch().stream(core.list_node, timeout_seconds=1), timeout=5)  # raises unless it ends
    assert events == [] and time.monotonic() - start >= 0.9  # ended by the server, not before the second


async def test_bookmarks_arrive_at_the_interval_and_watch_yields_them_as_bookmark(kube: Kube) -> None:
    """ "Watch bookmarks": with allowWatchBookmarks=true the server sends BOOKMARK events whose object has only
    kind, apiVersion and metadata.resourceVersion; every change up to that version was sent before it.
    kubernetes-asyncio's Watch yields them with type BOOKMARK and takes their resourceVersion."""
    emulator, client = kube
    emulator.bookmark_interval = 0.2
    core = CoreV1Api(client)
    listed = await core.list_node()
    writer = asyncio.create_task(_later(0.3, lambda: core.create_node({"metadata": {"name": "n1"}})))
    stream = watch.Watch()
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        async for ev in stream.stream(
            core.list_node,
            resource_version=listed.metadata.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ):
            seen.append({"type": ev["type"], "raw": ev["raw_object"], "watch_rv": stream.resource_version})
            if sum(1 for s in seen if s["type"] == "BOOKMARK") >= 3 and any(s["type"] == "ADDED" for s in seen):
                break
    await stream.close()
    node = await writer
    bookmarks = [s for s in seen if s["type"] == "BOOKMARK"]
    assert all(set(b["raw"]) == {"kind", "apiVersion", "metadata"} for b in bookmarks)
    assert all(set(b["raw"]["metadata"]) == {"resourceVersion"} and b["raw"]["kind"] == "Node" for b in bookmarks)
    assert all(b["watch_rv"] == b["raw"]["metadata"]["resourceVersion"] for b in bookmarks)
    added_at = next(i for i, s in enumerate(seen) if s["type"] == "ADDED")
    later = [b for b in seen[added_at:] if b["type"] == "BOOKMARK"]
    assert later and all(
        int(b["raw"]["metadata"]["resourceVersion"]) >= int(node.metadata.resource_version) for b in later
    )


async def test_no_bookmarks_unless_asked(kube: Kube) -> None:
    """Bookmarks are opt-in: without allowWatchBookmarks a quiet watch sends nothing."""
    emulator, client = kube
    emulator.bookmark_interval = 0.1
    core = CoreV1Api(client)
    assert await _collect(watch.Watch().stream(core.list_node, resource_version="1", timeout_seconds=1)) == []


async def test_send_initial_events_ends_with_an_annotated_bookmark(kube: Kube) -> None:
    """Streaming lists ("Watch bookmarks", sendInitialEvents): the current objects as ADDED, then a BOOKMARK
    annotated k8s.io/initial-events-end=true; without resourceVersionMatch=NotOlderThan it is 422."""
    _, client = kube
    core = CoreV1Api(client)
    for name in ("a", "b"):
        await core.create_node({"metadata": {"name": name}})
    stream = watch.Watch()
    seen = []
    async with asyncio.timeout(5):
        async for ev in stream.stream(
            core.list_node,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ):
            seen.append((ev["type"], ev["raw_object"]["metadata"]))
            if ev["type"] == "BOOKMARK":
                break
    await stream.close()
    assert [t for t, _ in seen] == ["ADDED", "ADDED", "BOOKMARK"]
    assert seen[-1][1]["annotations"] == {"k8s.io/initial-events-end": "true"}
    with pytest.raises(ApiException) as err:
        await core.list_node(watch=True, send_initial_events=True, allow_watch_bookmarks=True)
    assert err.value.status == 422


async def test_watch_from_a_compacted_version_is_one_error_event_410_expired(kube: Kube) -> None:
    """ "410 Gone": a watch from a resourceVersion older than the compaction horizon answers 200 with a single
    ERROR event whose object is a Status (code 410, reason Expired), then ends. kubernetes-asyncio turns it
    into ApiException(410); with timeout_seconds it does so at once."""
    emulator, client = kube
    core = CoreV1Api(client)
    listed = await core.list_node()
    await core.create_node({"metadata": {"name": "n1"}})
    emulator.compact()
    raw = await core.list_node(watch=True, resource_version=listed.metadata.resource_version, _preload_content=False)
    assert raw.status == 200
    lines = [json.loads(line) for line in (await raw.read()).splitlines()]
    assert len(lines) == 1 and lines[0]["type"] == "ERROR"
    status = lines[0]["object"]
    assert (status["kind"], status["code"], status["reason"], status["status"]) == ("Status", 410, "Expired", "Failure")
    with pytest.raises(ApiException) as err:
        await _collect(
            watch.Watch().stream(core.list_node, resource_version=listed.metadata.resource_version, timeout_seconds=5)
        )
    assert err.value.status == 410
    current = str(emulator.store.rv)
    assert await _collect(watch.Watch().stream(core.list_node, resource_version=current, timeout_seconds=1)) == []


async def test_kubernetes_asyncio_retries_a_410_once_with_the_same_version_then_raises(kube: Kube) -> None:
    """What the client sees without timeout_seconds: Watch retries a 410 once, with the same resourceVersion
    (so it fails again), then raises ApiException(410). A source must re-list on 410 itself (docs/kubernetes.md)."""
    emulator, client = kube
    core = CoreV1Api(client)
    old = (await core.list_node()).metadata.resource_version
    await core.create_node({"metadata": {"name": "n1"}})
    emulator.compact()
    emulator.faults.log.clear()
    with pytest.raises(ApiException) as err:
        await _collect(watch.Watch().stream(core.list_node, resource_version=old))
    assert err.value.status == 410
    watches = [path for method, path in emulator.faults.log if "watch=true" in path.lower()]
    assert len(watches) == 2 and all(f"resourceVersion={old}" in p for p in watches)


async def test_list_at_an_exact_version_and_410_once_compacted(kube: Kube) -> None:
    """ "Resource versions" for list: resourceVersionMatch=Exact reads the state at that version; a compacted
    version is 410 Expired (an HTTP error for a list); a version from the future is 504."""
    emulator, client = kube
    core = CoreV1Api(client)
    await core.create_node({"metadata": {"name": "a"}})
    then = (await core.list_node()).metadata.resource_version
    await core.create_node({"metadata": {"name": "b"}})
    await core.delete_node("a")
    past = await core.list_node(resource_version=then, resource_version_match="Exact")
    assert [n.metadata.name for n in past.items] == ["a"] and past.metadata.resource_version == then
    now = await core.list_node(resource_version=then, resource_version_match="NotOlderThan")
    assert [n.metadata.name for n in now.items] == ["b"]
    with pytest.raises(ApiException) as future:
        await core.list_node(resource_version=str(emulator.store.rv + 100), resource_version_match="NotOlderThan")
    assert future.value.status == 504
    emulator.compact()
    with pytest.raises(ApiException) as gone:
        await core.list_node(resource_version=then, resource_version_match="Exact")
    assert gone.value.status == 410 and json.loads(gone.value.body)["reason"] == "Expired"


async def test_paginated_list_is_one_consistent_snapshot_and_410_after_compaction(kube: Kube) -> None:
    """ "Retrieving large results sets in chunks": limit + continue page through the state at the first page's
    resourceVersion (later writes do not show); a continue token whose version was compacted is 410."""
    emulator, client = kube
    core = CoreV1Api(client)
    for i in range(5):
        await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": f"c{i}"}})
    first = await core.list_namespaced_config_map(NAMESPACE, limit=2)
    assert [c.metadata.name for c in first.items] == ["c0", "c1"]
    assert first.metadata.remaining_item_count == 3 and first.metadata._continue
    await core.delete_namespaced_config_map("c3", NAMESPACE)
    await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "c9"}})
    names, token = [], first.metadata._continue
    while token:
        page = await core.list_namespaced_config_map(NAMESPACE, limit=2, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        names += [c.metadata.name for c in page.items]
        token = page.metadata._continue
    assert names == ["c2", "c3", "c4"]
    emulator.compact()
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map(NAMESPACE, limit=2, _continue=first.metadata._continue)
    assert err.value.status == 410
