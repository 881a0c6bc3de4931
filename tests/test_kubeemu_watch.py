"""Watches on the emulator through kubernetes-asyncio's ``watch.Watch``.

Pinned to "API Concepts" (https://kubernetes.io/docs/reference/using-api/api-concepts/): "Efficient detection
of changes", "Watch bookmarks", "Resource versions" and "410 Gone".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import watch
from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi

from magw.kubeemu import Emulator
from tests import kubeemu_fixtures
from tests.kubeemu_fixtures import NAMESPACE

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
    events = await _collect(watch.Watch().stream(core.list_node, timeout_seconds=1), timeout=5)
    elapsed = time.monotonic() - start
    assert events == [] and 0.9 <= elapsed < 3.0
