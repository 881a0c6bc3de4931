"""Endpoints and Clusters between a cluster's API server and the broker's: two emulators, the real client."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio.client import CustomObjectsApi

from magw.sources.kube.brokersync import BrokerSync, plan_sync
from magw.sources.kube.reflector import Timing
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures
from tests.support.kubeemu_fixtures import BROKER_NAMESPACE, KubeEnv, running_emulator

FAST = Timing(watch_timeout=5, inactivity=3, request_timeout=3)


def _names(objects: dict[Any, Any]) -> set[str]:
    return {k[1] for k in objects}


def test_plan_pushes_ours_up_pulls_theirs_down_and_deletes_what_the_owner_deleted() -> None:
    ours = ko.endpoint("east", "e-gw1", "172.18.0.6")
    theirs = ko.endpoint("west", "w-gw1", "172.19.0.4")
    stale_remote = ko.endpoint("west", "w-gw9", "172.19.0.9")
    local = {("ns", "east-e-gw1"): ours, ("ns", "west-w-gw9"): stale_remote}
    broker = {("b", "west-w-gw1"): theirs, ("b", "east-e-gw2"): ko.endpoint("east", "e-gw2", "172.18.0.8")}
    writes = {(w.side, w.action, w.name) for w in plan_sync("east", "Endpoint", local, broker)}
    assert writes == {
        ("broker", "ensure", "east-e-gw1"),  # ours, missing there
        ("broker", "delete", "east-e-gw2"),  # ours, gone here
        ("local", "ensure", "west-w-gw1"),  # theirs, missing here
        ("local", "delete", "west-w-gw9"),  # theirs, gone there
    }
    labelled = {("ns", "east-e-gw1"): ours, ("ns", "west-w-gw1"): theirs}
    in_sync = {("b", "east-e-gw1"): ours, ("b", "west-w-gw1"): theirs}
    assert plan_sync("east", "Endpoint", labelled, in_sync) == []


until = functools.partial(kubeemu_fixtures.until, timeout=8.0)


@contextlib.asynccontextmanager
async def clusterset() -> AsyncIterator[tuple[KubeEnv, KubeEnv, BrokerSync]]:
    async with running_emulator(name="east") as east, running_emulator(BROKER_NAMESPACE, name="broker") as broker:
        east.emulator.load(
            [ko.cluster("east", "10.1.0.0/16", "100.1.0.0/16"), ko.endpoint("east", "e-gw1", "172.18.0.6")]
        )
        broker.emulator.load(
            [
                ko.cluster("west", "10.2.0.0/16", "100.2.0.0/16", ns=BROKER_NAMESPACE),
                ko.endpoint("west", "w-gw1", "172.19.0.4", ns=BROKER_NAMESPACE),
            ]
        )
        sync = BrokerSync(
            east.client,
            broker.client,
            local_cluster="east",
            namespace=ko.NS,
            broker_namespace=BROKER_NAMESPACE,
            resync=1.0,
            timing=FAST,
        )
        task = asyncio.create_task(sync.run())
        try:
            yield east, broker, sync
        finally:
            sync.stop()
            await asyncio.wait_for(task, 5)


def _view(sync: BrokerSync, side: str, kind: str) -> set[str]:
    return _names(sync.reflectors[(side, kind)].objects)


async def test_both_ways_and_back_again() -> None:
    async with clusterset() as (east, broker, sync):
        await until(lambda: _view(sync, "broker", "Endpoint") == {"east-e-gw1", "west-w-gw1"})
        await until(lambda: _view(sync, "local", "Endpoint") == {"east-e-gw1", "west-w-gw1"})
        await until(lambda: _view(sync, "local", "Cluster") == {"east", "west"})
        await until(lambda: _view(sync, "broker", "Cluster") == {"east", "west"})
        pushed = broker.emulator.store.get(_rt(broker, "endpoints"), BROKER_NAMESPACE, "east-e-gw1")
        assert pushed["metadata"]["labels"] == {"submariner.io/clusterID": "east"}

        b = CustomObjectsApi(broker.client)
        await b.delete_namespaced_custom_object("submariner.io", "v1", BROKER_NAMESPACE, "endpoints", "east-e-gw1")
        await until(lambda: "east-e-gw1" in _view(sync, "broker", "Endpoint"))  # ours comes back
        await b.delete_namespaced_custom_object("submariner.io", "v1", BROKER_NAMESPACE, "endpoints", "west-w-gw1")
        await until(lambda: "west-w-gw1" not in _view(sync, "local", "Endpoint"))  # theirs goes here too

        e = CustomObjectsApi(east.client)
        await e.delete_namespaced_custom_object("submariner.io", "v1", ko.NS, "endpoints", "east-e-gw1")
        await until(lambda: "east-e-gw1" not in _view(sync, "broker", "Endpoint"))  # withdrawn everywhere


async def test_an_unreachable_broker_changes_nothing_here_and_the_sync_resumes() -> None:
    async with clusterset() as (east, broker, sync):
        await until(lambda: "west-w-gw1" in _view(sync, "local", "Endpoint"))
        await broker.emulator.stop()
        e = CustomObjectsApi(east.client)
        body = ko.endpoint("east", "e-gw2", "172.18.0.8")
        await e.create_namespaced_custom_object("submariner.io", "v1", ko.NS, "endpoints", body)
        await asyncio.sleep(1.5)  # passes run and fail; nothing here is deleted
        assert east.emulator.store.get(_rt(east, "endpoints"), ko.NS, "west-w-gw1")["spec"]["hostname"] == "w-gw1"
        broker.emulator.compact()  # it comes back having forgotten our resourceVersions: relists, then a pass
        await broker.emulator.start()
        await until(lambda: "east-e-gw2" in _view(sync, "broker", "Endpoint"), timeout=20)
        assert "west-w-gw1" in _view(sync, "local", "Endpoint")


async def test_nothing_is_written_while_disabled_or_before_both_sides_listed() -> None:
    async with clusterset() as (_east, broker, sync):
        sync.enabled = False
        await until(lambda: sync.synced)
        assert await sync.sync_once() == 0
        assert "east-e-gw1" not in _names(broker.emulator.store.objects(_rt(broker, "endpoints")))


def _rt(env: KubeEnv, plural: str) -> Any:
    return env.emulator.store.registry.find("submariner.io", "v1", plural)
