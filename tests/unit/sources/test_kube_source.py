"""KubeSource against the API server emulator, with the real kubernetes-asyncio client: the same Snapshot as the
file broker, changes followed, nothing pruned before every input has listed, relists that never show a gap."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi

from magw.kubeemu import Emulator
from magw.kubeemu.resources import DEFAULT_TYPES
from magw.model import Snapshot
from magw.sources.file.broker import FileBroker
from magw.sources.kube.client import api_client, write_kubeconfig
from magw.sources.kube.reflector import Reflector, Timing
from magw.sources.kube.source import KubeSource
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures
from tests.support.paths import EXAMPLES

kube_env = kubeemu_fixtures.kube_env
EXAMPLE = EXAMPLES / "broker"
FAST = Timing(watch_timeout=5, inactivity=3, request_timeout=5)


until = functools.partial(kubeemu_fixtures.until, timeout=5.0)


@contextlib.asynccontextmanager
async def running(source: KubeSource) -> AsyncIterator[list[Snapshot | None]]:
    seen: list[Snapshot | None] = []
    source.subscribe(seen.append)
    task = asyncio.create_task(source.run())
    try:
        yield seen
    finally:
        source.stop()
        await asyncio.wait_for(task, 5)


async def test_the_example_clusterset_is_the_file_brokers_snapshot_and_changes_follow(
    kube_env: kubeemu_fixtures.KubeEnv,
) -> None:
    kube_env.emulator.load(ko.east())
    broker = FileBroker(EXAMPLE, local_cluster="east")
    broker.scan()
    source = KubeSource(kube_env.client, local_cluster="east", namespace=ko.NS, globalnet=False, timing=FAST)
    async with running(source):
        await until(lambda: source.initial_sync_done)
        assert source.snapshot == broker.snapshot
        assert source.local_node_document("e-gw1") is not None
        assert source.local_node_document("e-gw1")["public_ip"] == "198.51.100.6"  # type: ignore[index]

        custom = CustomObjectsApi(kube_env.client)
        await custom.delete_namespaced_custom_object("submariner.io", "v1", ko.NS, "endpoints", "west-w-gw1")
        await until(lambda: source.snapshot is not None and not source.snapshot.endpoints_of("west"))

        # a node appears only once its route agent has written the CNI annotation
        await CoreV1Api(kube_env.client).create_node(ko.node("e-w2", "172.18.0.9", None))
        await asyncio.sleep(0.3)
        assert "e-w2" not in {n.name for n in source.snapshot.nodes}  # type: ignore[union-attr]
        patch = {"metadata": {"annotations": {"submariner.io/cniIfaceIp": "10.1.4.1"}}}
        await CoreV1Api(kube_env.client).patch_node("e-w2", patch)
        await until(lambda: "e-w2" in {n.name for n in source.snapshot.nodes})  # type: ignore[union-attr]


async def test_nothing_is_complete_before_every_input_has_listed(tmp_path: Path) -> None:
    """One resource that cannot be listed (its CRD is not installed yet) holds the whole source back: no
    snapshot, ``initial_sync_done`` False, so the reconciler prunes nothing (``inputs_synced``)."""
    missing = [t for t in DEFAULT_TYPES if t.plural == "submariners"]
    emulator = Emulator(socket_path=tmp_path / "k.sock", types=[t for t in DEFAULT_TYPES if t not in missing])
    await emulator.start()
    client = await api_client(write_kubeconfig(tmp_path / "kc", emulator.url, ko.NS))
    try:
        emulator.load([o for o in ko.east() if o["kind"] != "Submariner"])
        source = KubeSource(client, local_cluster="east", namespace=ko.NS, globalnet=False, timing=FAST)
        async with running(source) as seen:
            await until(lambda: sum(r.synced for r in source.reflectors.values()) == len(source.reflectors) - 1)
            await asyncio.sleep(0.5)  # the missing one keeps failing and retrying
            assert not source.reflectors["Submariner"].synced
            assert not source.initial_sync_done and source.snapshot is None and seen == []
            assert source.scan() is False and source.snapshot is None
            for t in missing:
                emulator.store.registry.add(t)
            await until(lambda: source.initial_sync_done, timeout=15)  # the backoff caps at 10 s
            assert source.snapshot is not None and len(seen) >= 1
            assert source.snapshot.config.multi_active is False  # no Submariner object: the seed's default
    finally:
        await client.close()
        await emulator.stop()


def _complete(snapshot: Snapshot | None) -> bool:
    return snapshot is not None and len(snapshot.nodes) == 3 and len(snapshot.endpoints) == 3


async def test_relists_after_410_drops_and_restarts_never_show_a_gap(kube_env: kubeemu_fixtures.KubeEnv) -> None:
    emulator = kube_env.emulator
    emulator.load(ko.east())
    source = KubeSource(kube_env.client, local_cluster="east", namespace=ko.NS, globalnet=False, timing=FAST)
    async with running(source) as seen:
        await until(lambda: source.initial_sync_done)
        custom = CustomObjectsApi(kube_env.client)
        for round_ in range(3):
            # a change, then the history is compacted and every watch dropped: each reflector must relist
            body = ko.endpoint("west", f"w-gw{round_ + 2}", f"172.19.0.{round_ + 10}")
            await custom.create_namespaced_custom_object("submariner.io", "v1", ko.NS, "endpoints", body)
            emulator.compact()
            emulator.drop_watches()
            await until(lambda n=round_: len(source.snapshot.endpoints) == 4 + n)  # type: ignore[union-attr]
        await emulator.stop()  # the API server restarts
        await asyncio.sleep(0.5)
        assert source.snapshot is not None and len(source.snapshot.endpoints) == 6  # unreachable: kept as is
        await emulator.start()
        await custom.delete_namespaced_custom_object("submariner.io", "v1", ko.NS, "endpoints", "west-w-gw4")
        await until(lambda: len(source.snapshot.endpoints) == 5, timeout=15)  # type: ignore[union-attr]
        assert sum(r.relists_after_gone for r in source.reflectors.values()) >= 1
        # no snapshot ever lost a node or an Endpoint that was there all along
        assert all(_complete(s) for s in seen[:1]) and all(s is not None and len(s.nodes) == 3 for s in seen)
        base = {("east", "e-gw1"), ("east", "e-gw2"), ("west", "w-gw1")}
        assert all(base <= {(e.cluster, e.hostname) for e in s.endpoints} for s in seen if s is not None)


async def test_a_bad_object_is_left_out_and_its_last_good_version_stays(kube_env: kubeemu_fixtures.KubeEnv) -> None:
    kube_env.emulator.load(ko.east())
    source = KubeSource(kube_env.client, local_cluster="east", namespace=ko.NS, globalnet=False, timing=FAST)
    async with running(source):
        await until(lambda: source.initial_sync_done)
        bad: dict[str, Any] = {"spec": {"private_ip": "not-an-address"}}
        custom = CustomObjectsApi(kube_env.client)
        await custom.patch_namespaced_custom_object(
            "submariner.io", "v1", ko.NS, "endpoints", "west-w-gw1", bad, _content_type="application/merge-patch+json"
        )
        await until(lambda: any("west-w-gw1" in f for f in source.problem_files()))
        (west,) = source.snapshot.endpoints_of("west")  # type: ignore[union-attr]
        assert str(west.private_ip) == "172.19.0.4"  # the last good version


@pytest.mark.parametrize("interval", [0.2])
async def test_a_silent_watch_is_ended_and_resumed(kube_env: kubeemu_fixtures.KubeEnv, interval: float) -> None:
    """No event and no bookmark for ``inactivity``: the watch is ended by us and a new one starts from the last
    resourceVersion (no relist), and a later change still arrives."""
    kube_env.emulator.load(ko.east())
    timing = Timing(watch_timeout=30, inactivity=interval, request_timeout=5)
    source = KubeSource(kube_env.client, local_cluster="east", namespace=ko.NS, globalnet=False, timing=timing)
    async with running(source):
        await until(lambda: source.initial_sync_done)
        lists = {k: r.lists for k, r in source.reflectors.items()}
        watches_before = sum(1 for m, p in kube_env.emulator.faults.log if "watch=" in p)
        await asyncio.sleep(interval * 5)
        watches_after = sum(1 for m, p in kube_env.emulator.faults.log if "watch=" in p)
        assert watches_after >= watches_before + len(source.reflectors)  # each watch ended and started again
        assert {k: r.lists for k, r in source.reflectors.items()} == lists  # without a relist
        await CoreV1Api(kube_env.client).delete_node("e-w1")
        await until(lambda: "e-w1" not in {n.name for n in source.snapshot.nodes})  # type: ignore[union-attr]


async def test_bookmarks_move_the_resource_version_on_and_are_nothing_else(tmp_path: Path) -> None:
    """Other resources' writes move the server's resourceVersion; a bookmark brings it to a silent watch, which
    resumes from there after a drop (no relist, no replay), and no event reaches the consumer."""
    emulator = Emulator(socket_path=tmp_path / "k.sock", bookmark_interval=0.1)
    await emulator.start()
    client = await api_client(write_kubeconfig(tmp_path / "kc", emulator.url, ko.NS))
    events: list[Any] = []
    reflector = Reflector(kind="Node", list_fn=CoreV1Api(client).list_node, on_change=events.extend, timing=FAST)
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: reflector.synced)
        listed = int(reflector.resource_version or 0)
        core = CoreV1Api(client)
        for i in range(3):
            cm = ko.config_map(round=str(i))
            cm["metadata"]["name"] = f"cm-{i}"
            await core.create_namespaced_config_map(ko.NS, cm)
        await until(lambda: int(reflector.resource_version) >= listed + 3)
        assert [e.type for e in events] == ["SYNCED"]  # bookmarks are not events
        emulator.drop_watches()
        await asyncio.sleep(0.5)
        assert reflector.lists == 1 and [e.type for e in events] == ["SYNCED"]
    finally:
        reflector.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()
        await emulator.stop()


async def test_a_big_list_comes_in_pages_and_is_used_only_once_complete(kube_env: kubeemu_fixtures.KubeEnv) -> None:
    """A list asks for pages (``limit`` and ``continue``), so the loop decodes one page at a time: 7 Nodes with a
    page of 3 are 3 requests, one consistent list, one SYNCED event with all 7."""
    kube_env.emulator.load([*ko.east(), *(ko.node(f"n{i}", f"172.18.1.{i}", None) for i in range(4))])
    events: list[Any] = []
    timing = Timing(watch_timeout=5, inactivity=3, request_timeout=5, page=3)
    reflector = Reflector(kind="Node", list_fn=CoreV1Api(kube_env.client).list_node, on_change=events.extend,
                          timing=timing)  # fmt: skip
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: reflector.synced)
        assert len(reflector.objects) == 7
        lists = [path for _, path in kube_env.emulator.faults.log if "/nodes" in path and "watch=" not in path]
        assert len(lists) == 3
        assert [("limit=3" in p, "continue=" in p) for p in lists] == [(True, False), (True, True), (True, True)]
        assert [e.type for e in events] == ["SYNCED"]
    finally:
        reflector.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

