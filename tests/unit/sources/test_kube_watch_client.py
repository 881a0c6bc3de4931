"""A watch builds no client of its own (``magw.sources.kube.reflector.PlainWatch``).

kubernetes_asyncio's ``Watch()`` builds an ``ApiClient`` each time, whose REST client loads the system's CA bundle
(137 ms of CPU on the event loop, measured): a route agent restarting its 13 watches after a dropped connection
had its loop blocked for 1.8 s and its liveness set expired (the kube soak's ``watch-drop``). Here the REST clients
made while a source's reflectors watch through three dropped connections are counted: none; the events still
arrive as plain dicts and the views follow them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kubernetes_asyncio.client import CoreV1Api, rest
from kubernetes_asyncio.watch import Watch

from magw.sources.kube.reflector import PlainWatch, Timing
from magw.sources.kube.source import KubeSource
from tests.support import kube_objects as ko
from tests.support.kubeemu_fixtures import running_emulator, until

FAST = Timing(watch_timeout=5, inactivity=2, request_timeout=1)


@pytest.fixture
def rest_clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every ``RESTClientObject`` built from now on (each one loads the CA bundle)."""
    made: list[object] = []
    real = rest.RESTClientObject.__init__

    def counting(self: rest.RESTClientObject, *args: object, **kwargs: object) -> None:
        made.append(self)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rest.RESTClientObject, "__init__", counting)
    yield made


async def test_plain_watch_has_the_attributes_watch_sets(rest_clients: list[object]) -> None:
    """If kubernetes_asyncio's ``Watch.__init__`` grows an attribute, ``PlainWatch`` must set it too."""
    real = Watch(return_type="object")
    assert len(rest_clients) == 1  # the library's own watch builds a client (the counter sees it)
    plain = PlainWatch()
    assert len(rest_clients) == 1
    assert sorted(vars(plain)) == sorted(vars(real))
    assert plain.get_return_type(CoreV1Api.list_node) == "object"
    await real.close()


def _round(source: KubeSource) -> str | None:
    maps = source.reflectors["ConfigMap"].objects.values()
    return next((str(m["data"]["round"]) for m in maps if "round" in (m.get("data") or {})), None)


async def test_watches_restarted_after_dropped_connections_build_no_client(rest_clients: list[object]) -> None:
    async with running_emulator() as env:
        env.emulator.load(ko.east())
        source = KubeSource(env.client, local_cluster="east", namespace=ko.NS, globalnet=False, timing=FAST)
        task = asyncio.create_task(source.run())
        try:
            await until(lambda: source.snapshot is not None, what="the first snapshot")
            built = len(rest_clients)
            core = CoreV1Api(env.client)
            for i in range(3):
                env.emulator.drop_watches()
                await asyncio.sleep(0.5)  # past the 0.2 s backoff: every kind watches again
                await core.patch_namespaced_config_map("magw-config", ko.NS, {"data": {"round": str(i)}})
                await until(lambda i=i: _round(source) == str(i), what=f"round {i} seen")  # type: ignore[misc]
            assert len(rest_clients) == built  # no watch of any kind built a client
            assert all(isinstance(o, dict) for r in source.reflectors.values() for o in r.objects.values())
        finally:
            source.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
