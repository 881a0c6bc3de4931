"""Fixtures for tests against the Kubernetes API server emulator (``magw.kubeemu``), with the real client.

Bind the fixtures you use in a test module (pytest finds fixtures by module attribute name; an assignment
rather than an import keeps ruff's F811 quiet where a test's parameter has the same name)::

    from tests.support import kubeemu_fixtures

    kube, kube_env = kubeemu_fixtures.kube, kubeemu_fixtures.kube_env

    async def test_x(kube):
        emulator, client = kube
        await CoreV1Api(client).list_node()

``kube_env`` yields a ``KubeEnv`` (emulator, client, kubeconfig path, directory) for tests that start daemons
with ``--kubeconfig``; ``running_emulator()`` is the same as an async context manager, for tests that need
several API servers (a cluster's and the broker's). The emulator listens on a unix socket in a fresh
directory (short, so the socket path fits in 108 bytes), which is removed afterwards with everything in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import attrs
import pytest
from kubernetes_asyncio.client import ApiClient

from magw.kubeemu import Emulator
from magw.sources.kube.client import api_client, write_kubeconfig

NAMESPACE = "submariner-operator"
BROKER_NAMESPACE = "submariner-k8s-broker"


@attrs.frozen
class KubeEnv:
    emulator: Emulator
    client: ApiClient
    kubeconfig: Path
    directory: Path


@contextlib.asynccontextmanager
async def running_emulator(
    namespace: str = NAMESPACE, *, name: str = "kube", bookmark_interval: float = 60.0
) -> AsyncIterator[KubeEnv]:
    """A started emulator, a kubeconfig for it (context namespace ``namespace``) and a client; all gone after."""
    directory = Path(tempfile.mkdtemp(prefix="kubeemu-"))
    emulator = Emulator(socket_path=directory / f"{name}.sock", bookmark_interval=bookmark_interval)
    client: ApiClient | None = None
    try:
        await emulator.start()
        kubeconfig = write_kubeconfig(directory / f"{name}.kubeconfig", emulator.url, namespace)
        client = await api_client(kubeconfig)
        yield KubeEnv(emulator, client, kubeconfig, directory)
    finally:
        if client is not None:
            await client.close()
        await emulator.stop()
        shutil.rmtree(directory, ignore_errors=True)


_T = TypeVar("_T")


@contextlib.asynccontextmanager
async def threaded_emulator(namespace: str = NAMESPACE, **emulator_kwargs: Any) -> AsyncIterator[KubeEnv]:
    """``running_emulator``, but the emulator runs on an event loop of its own in a thread: a daemon whose writes
    block its loop until the API answers (as against a real API server) would wait forever on an emulator on that
    same loop. ``emulator_kwargs`` go to ``Emulator`` (``tokens=...``)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kubeemu", daemon=True)
    thread.start()
    directory = Path(tempfile.mkdtemp(prefix="kubeemu-"))

    def on_thread(coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(10)

    async def make() -> Emulator:
        emulator = Emulator(socket_path=directory / "kube.sock", **emulator_kwargs)
        await emulator.start()
        return emulator

    emulator = await asyncio.to_thread(on_thread, make())
    client = None
    try:
        kubeconfig = write_kubeconfig(directory / "kube.kubeconfig", emulator.url, namespace)
        client = await api_client(kubeconfig)
        yield KubeEnv(emulator, client, kubeconfig, directory)
    finally:
        if client is not None:
            await client.close()
        await asyncio.to_thread(on_thread, emulator.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def kube_env() -> AsyncIterator[KubeEnv]:
    async with running_emulator() as env:
        yield env


@pytest.fixture
async def kube(kube_env: KubeEnv) -> AsyncIterator[tuple[Emulator, ApiClient]]:
    """(emulator, ApiClient) on a fresh emulator: the client is kubernetes-asyncio's, over the unix socket."""
    yield kube_env.emulator, kube_env.client


async def until(check: Callable[[], Any], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``check`` (a function, or one returning a coroutine) until it is truthy; fail after ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                result = check()
                if asyncio.iscoroutine(result):
                    result = await result
                if result:
                    return
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None


@contextlib.asynccontextmanager
async def http_emulator(**emulator_kwargs: Any) -> AsyncIterator[aiohttp.ClientSession]:
    """An emulator (``Emulator(**emulator_kwargs)``) on a unix socket in a short temporary directory (a socket path
    must fit in 108 bytes, whatever the test's name), and a plain aiohttp session to it; all gone after."""
    directory = Path(tempfile.mkdtemp(prefix="kubeemu-"))
    socket = directory / "k.sock"
    try:
        async with Emulator(socket_path=socket, **emulator_kwargs), aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=str(socket))
        ) as session:
            yield session
    finally:
        shutil.rmtree(directory, ignore_errors=True)
