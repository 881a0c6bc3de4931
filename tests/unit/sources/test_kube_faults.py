"""Faults of the API servers (docs/kubernetes.md): a route agent fed by the Kubernetes source, and the broker sync,
through server restarts mid-watch, repeated 410s, dropped connections, slow responses, a stale view and a broker gone
for a minute. Through all of them: nothing pruned before a relist completes, nothing flushed, convergence after.

The route agent runs in this process on the fake kernel (``magw.daemons.route_agent.node_driver.fake_driver``); after
every sync
the test counts the routes the fake kernel holds toward the remote cluster. That count must never drop while
the API server misbehaves, and must follow a real change once it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from ipaddress import IPv4Network
from typing import Any

import pytest
from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from prometheus_client import CollectorRegistry

from magw.daemons.route_agent.app import RouteAgent
from magw.daemons.route_agent.node_driver import fake_driver
from magw.desired.state import DesiredState
from magw.reconcile.driver import ApplyResult, ChangeSet
from magw.sources.kube.brokersync import BrokerSync
from magw.sources.kube.crd import Crd
from magw.sources.kube.reflector import Timing
from magw.sources.kube.source import KubeSource
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures
from tests.support.kubeemu_fixtures import BROKER_NAMESPACE, KubeEnv, running_emulator

FAST = Timing(watch_timeout=5, inactivity=2, request_timeout=1)
WEST = IPv4Network("10.2.0.0/16")


until = kubeemu_fixtures.until


class Watched:
    """A fake kernel that counts, after every change applied to it, its routes toward the remote cluster."""

    def __init__(self) -> None:
        self.inner = fake_driver()
        self.west_routes: list[int] = []  # after every apply
        self.agent: RouteAgent | None = None

    def observe(self) -> DesiredState:
        return self.inner.observe()

    def apply(self, changes: ChangeSet) -> ApplyResult:
        result = self.inner.apply(changes)
        self.west_routes.append(self.now)
        return result

    @property
    def now(self) -> int:
        return sum(1 for r in self.inner.observe().routes if r.dst == WEST)

    @property
    def source(self) -> KubeSource:
        assert self.agent is not None and isinstance(self.agent.source, KubeSource)
        return self.agent.source


@contextlib.asynccontextmanager
async def agent_on(env: KubeEnv) -> AsyncIterator[Watched]:
    source = KubeSource(env.client, local_cluster="east", namespace=ko.NS, globalnet=False, timing=FAST)
    watched = Watched()
    agent = RouteAgent(source=source, node="e-w1", driver=watched, resync_period=0.5, registry=CollectorRegistry())
    watched.agent = agent
    stop = asyncio.Event()
    task = asyncio.create_task(agent.serve(stop))
    try:
        await until(lambda: watched.now == 1, what="the first plan with the route to west")
        yield watched
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 10) == 0


@pytest.fixture
async def env() -> AsyncIterator[KubeEnv]:
    async with running_emulator() as kube:
        kube.emulator.load(ko.east())
        yield kube


async def _add_west_gateway(env: KubeEnv, host: str, ip: str) -> None:
    body = ko.endpoint("west", host, ip)
    await CustomObjectsApi(env.client).create_namespaced_custom_object("submariner.io", "v1", ko.NS, "endpoints", body)


async def test_restart_mid_watch_and_repeated_410s_never_prune(env: KubeEnv) -> None:
    async with agent_on(env) as w:
        core = CoreV1Api(env.client)
        for i in range(4):
            env.emulator.drop_watches()
            # a change the dropped watches did not see, then compaction: the versions we hold are gone (410)
            await core.patch_namespaced_config_map("magw-config", ko.NS, {"data": {"round": str(i)}})
            env.emulator.compact()
            await asyncio.sleep(0.3)
        await env.emulator.stop()  # restart mid-watch, with the history gone too
        await asyncio.sleep(0.5)
        env.emulator.compact()
        await env.emulator.start()
        await _add_west_gateway(env, "w-gw2", "172.19.0.5")  # a real change after all that
        await until(lambda: w.source.snapshot is not None and len(w.source.snapshot.endpoints) == 4)
        await until(lambda: w.west_routes[-1:] == [1], what="the change applied")  # the route gets a 2nd hop
        assert min(w.west_routes) == 1  # never pruned, never flushed
        assert sum(r.relists_after_gone for r in w.source.reflectors.values()) >= 1


async def test_slow_responses_and_dropped_connections_change_nothing_until_they_recover(env: KubeEnv) -> None:
    async with agent_on(env) as w:
        env.emulator.delay(1.5)  # slower than the lists' 1 s timeout: every relist fails meanwhile
        env.emulator.drop_watches()
        env.emulator.compact()
        await asyncio.sleep(2.5)
        assert w.now == 1 and min(w.west_routes) == 1
        env.emulator.delay(0)
        custom = CustomObjectsApi(env.client)
        before = w.inner.observe()
        await custom.delete_namespaced_custom_object("submariner.io", "v1", ko.NS, "endpoints", "east-e-gw2")
        # the route stays (through e-gw1 now): its nexthop group loses a member
        await until(lambda: w.inner.observe().groups != before.groups, timeout=20, what="the plan follows a change")
        assert w.now == 1 and min(w.west_routes) == 1


async def test_a_stale_view_loses_its_write_and_the_next_pass_converges() -> None:
    """A writer whose view is older than the server's (a stale informer) gets 409 and changes nothing; the sync's
    next pass, on a fresh view, writes the right spec."""
    async with running_emulator(name="east") as east, running_emulator(BROKER_NAMESPACE, name="broker") as broker:
        east.emulator.load([ko.endpoint("east", "e-gw1", "172.18.0.6")])
        sync = BrokerSync(
            east.client, broker.client, local_cluster="east", namespace=ko.NS,
            broker_namespace=BROKER_NAMESPACE, resync=0.5, timing=FAST,
        )  # fmt: skip
        task = asyncio.create_task(sync.run())
        try:
            await until(
                lambda: ("submariner-k8s-broker", "east-e-gw1") in sync.reflectors[("broker", "Endpoint")].objects
            )
            stale = dict(sync.reflectors[("broker", "Endpoint")].objects[(BROKER_NAMESPACE, "east-e-gw1")])
            crd = Crd(broker.client, "endpoints", "Endpoint", BROKER_NAMESPACE)
            fresh = dict(stale["spec"], private_ip="172.18.0.99")
            await crd.replace(stale, fresh)  # someone else wrote meanwhile
            with pytest.raises(Exception) as err:
                await crd.replace(stale, dict(stale["spec"], private_ip="172.18.0.77"))  # our stale view
            assert getattr(err.value, "status", None) == 409
            await until(lambda: _broker_ip(sync) == "172.18.0.6", what="the owner's spec restored")
        finally:
            sync.stop()
            await asyncio.wait_for(task, 5)


def _broker_ip(sync: BrokerSync) -> Any:
    obj = sync.reflectors[("broker", "Endpoint")].objects.get((BROKER_NAMESPACE, "east-e-gw1"))
    return (obj or {}).get("spec", {}).get("private_ip")


async def test_broker_unreachable_for_a_minute() -> None:
    """The broker is down for 60 s: the local remote Endpoints stay (the route agents keep their routes), our
    change made meanwhile is not lost, and the sync catches up within the backoff cap once it is back."""
    async with running_emulator(name="east") as east, running_emulator(BROKER_NAMESPACE, name="broker") as broker:
        east.emulator.load(
            [ko.cluster("east", "10.1.0.0/16", "100.1.0.0/16"), ko.endpoint("east", "e-gw1", "172.18.0.6")]
        )
        broker.emulator.load([ko.endpoint("west", "w-gw1", "172.19.0.4", ns=BROKER_NAMESPACE)])
        sync = BrokerSync(
            east.client, broker.client, local_cluster="east", namespace=ko.NS,
            broker_namespace=BROKER_NAMESPACE, resync=1.0, timing=FAST,
        )  # fmt: skip
        task = asyncio.create_task(sync.run())
        local = sync.reflectors[("local", "Endpoint")]
        try:
            await until(lambda: (ko.NS, "west-w-gw1") in local.objects)
            await broker.emulator.stop()
            await CustomObjectsApi(east.client).create_namespaced_custom_object(
                "submariner.io", "v1", ko.NS, "endpoints", ko.endpoint("east", "e-gw2", "172.18.0.8")
            )
            for _ in range(12):  # a minute, looked at every 5 s
                await asyncio.sleep(5)
                assert (ko.NS, "west-w-gw1") in local.objects  # never removed for want of a broker
            broker.emulator.compact()
            await broker.emulator.start()
            remote = sync.reflectors[("broker", "Endpoint")]
            await until(lambda: (BROKER_NAMESPACE, "east-e-gw2") in remote.objects, timeout=15, what="catch-up")
            assert (ko.NS, "west-w-gw1") in local.objects
        finally:
            sync.stop()
            await asyncio.wait_for(task, 5)
