"""The emulator's fault API, as the real kubernetes-asyncio client experiences each fault.

These are the building blocks of the Kubernetes sources' fault tests (docs/kubernetes.md, "When an API
server is down"): a server restart mid-watch, dropped watch connections, slow responses, failing requests.
Each test shows what the client sees, so that a source's handling can be written against it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiException, CoreV1Api, CustomObjectsApi

from magw.kubeemu import Emulator, from_crd
from magw.kubeemu.history import HistoryEvent
from magw.kubeemu.resources import BUILTIN, CrdError
from magw.kubeemu.watch import Watcher
from magw.sources.kube.client import api_client, write_kubeconfig
from tests.support import kubeemu_fixtures
from tests.support.kubeemu_fixtures import NAMESPACE, running_emulator
from tests.support.paths import REPO

kube, kube_env = kubeemu_fixtures.kube, kubeemu_fixtures.kube_env  # the fixtures, by name

Kube = tuple[Emulator, Any]


async def _watch_task(core: CoreV1Api, rv: str, **kw: Any) -> asyncio.Task[list[str]]:
    """Watch nodes from ``rv`` in a task that returns the event types (``Emulator.watch_count`` tells it is open)."""
    stream = watch.Watch()

    async def run() -> list[str]:
        seen: list[str] = []
        try:
            async for ev in stream.stream(core.list_node, resource_version=rv, **kw):
                seen.append(ev["type"])
        finally:
            await stream.close()
        return seen

    return asyncio.create_task(run())


async def _until(predicate: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_restart_keeps_state_and_ends_open_watches() -> None:
    """stop() then start() on the same socket is a server restart that keeps etcd: open watches end (a
    client with timeout_seconds sees its iteration stop), objects and the resourceVersion counter survive, and
    the same ApiClient works again after the restart. While stopped, requests fail to connect."""
    async with running_emulator() as env:
        emulator, core = env.emulator, CoreV1Api(env.client)
        node = await core.create_node({"metadata": {"name": "n1"}})
        task = await _watch_task(core, node.metadata.resource_version, timeout_seconds=30)
        await _until(lambda: emulator.watch_count == 1)
        await emulator.stop()
        assert await asyncio.wait_for(task, 3) == []
        assert emulator.watch_count == 0 and not os.path.exists(emulator.socket_path or "")
        with pytest.raises(aiohttp.ClientConnectionError):
            await core.list_node()
        await emulator.start()
        listed = await core.list_node()
        assert [n.metadata.name for n in listed.items] == ["n1"]
        assert listed.metadata.resource_version == node.metadata.resource_version
        again = await core.create_node({"metadata": {"name": "n2"}})
        assert int(again.metadata.resource_version) > int(node.metadata.resource_version)


async def test_a_watch_without_timeout_reconnects_at_once_and_fails_while_the_server_is_down(kube: Kube) -> None:
    """kubernetes-asyncio's Watch without timeout_seconds treats a cleanly ended stream as "reconnect from the
    last resourceVersion" at once; during a restart that reconnect finds no server and the connection error
    (aiohttp.ClientConnectionError) leaves the iteration: a source must re-watch (or re-list) itself."""
    emulator, client = kube
    core = CoreV1Api(client)
    rv = (await core.list_node()).metadata.resource_version
    task = await _watch_task(core, rv)
    await _until(lambda: emulator.watch_count == 1)
    await emulator.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        await asyncio.wait_for(task, 3)
    await emulator.start()
    task = await _watch_task(core, rv, timeout_seconds=1)
    await core.create_node({"metadata": {"name": "after"}})
    assert await asyncio.wait_for(task, 3) == ["ADDED"]


async def test_drop_watches_breaks_the_stream_abruptly(kube: Kube) -> None:
    """drop_watches() closes every watch connection without the final chunk: the client's read fails with
    aiohttp.ClientPayloadError (kubernetes-asyncio does not catch it), whatever timeout_seconds says."""
    emulator, client = kube
    core = CoreV1Api(client)
    rv = (await core.list_node()).metadata.resource_version
    tasks = [await _watch_task(core, rv, **kw) for kw in ({"timeout_seconds": 30}, {})]
    await _until(lambda: emulator.watch_count == 2)
    assert emulator.drop_watches() == 2
    for task in tasks:
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(task, 3)
    await _until(lambda: emulator.watch_count == 0)
    assert [n.metadata.name for n in (await core.list_node()).items] == []  # the server still serves


async def test_delay_slows_every_response(kube: Kube) -> None:
    emulator, client = kube
    core = CoreV1Api(client)
    emulator.delay(0.3)
    start = time.monotonic()
    await core.list_node()
    assert time.monotonic() - start >= 0.3
    # Off again: with a 60 s delay set and then cleared, a request answers well inside 20 s. No tight upper
    # bound on a shared machine: only "not held the 60 s" is asserted.
    emulator.delay(60)
    emulator.delay(0)
    await asyncio.wait_for(core.list_node(), timeout=20)


async def test_fail_requests_answers_the_next_n_with_an_error_status(kube: Kube) -> None:
    """fail_requests(n, code): the next n requests get that code as a Status (429 with Retry-After), then
    requests are served again; nothing was written by the failed ones."""
    emulator, client = kube
    core = CoreV1Api(client)
    emulator.fail_requests(2, 429)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            await core.create_node({"metadata": {"name": "n1"}})
        assert err.value.status == 429 and err.value.headers["Retry-After"] == "1"
        assert json.loads(err.value.body)["reason"] == "TooManyRequests"
    assert (await core.list_node()).items == []
    emulator.fail_requests(1, 503)
    with pytest.raises(ApiException) as unavailable:
        await core.list_node()
    assert unavailable.value.status == 503
    await core.create_node({"metadata": {"name": "n1"}})


async def test_stop_leaves_no_task_behind(tmp_path: Path) -> None:
    """stop() ends the watch handlers and the server: no task of the emulator outlives it."""
    before = set(asyncio.all_tasks())
    async with running_emulator() as env:
        core = CoreV1Api(env.client)
        task = await _watch_task(core, "1", timeout_seconds=30, allow_watch_bookmarks=True)
        await _until(lambda: env.emulator.watch_count == 1)
        await env.emulator.stop()
        await asyncio.wait_for(task, 3)
    await asyncio.sleep(0)
    assert set(asyncio.all_tasks()) - before == set()


def test_slow_watcher_is_closed_when_its_queue_overflows() -> None:
    """A watcher that does not keep up is closed (a real server drops a slow watcher); the client re-watches
    from its last resourceVersion."""
    rt = BUILTIN[0]
    w = Watcher(rt, None, lambda o: True, limit=3)
    w.live = True
    for rv in range(2, 7):
        w.offer(HistoryEvent(rv, "ADDED", rt.key, ("", f"n{rv}"), {"metadata": {"name": f"n{rv}"}}, None))
    assert w.ended == "overflow"


def test_from_crd_builds_a_type_per_served_version() -> None:
    """A CRD manifest (apiextensions.k8s.io/v1) is enough to serve its kind: scope, plural, status subresource."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "listKind": "WidgetList"},
            "scope": "Cluster",
            "versions": [
                {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}},
                {"name": "v1beta1", "served": False, "storage": False},
            ],
        },
    }
    (rt,) = from_crd(crd)
    assert (rt.api_version, rt.kind, rt.plural, rt.namespaced, rt.status) == (
        "example.com/v1",
        "Widget",
        "widgets",
        False,
        True,
    )
    with pytest.raises(CrdError):
        from_crd({"kind": "ConfigMap"})


async def test_crd_manifests_of_deploy_are_served_as_they_define() -> None:
    """Whatever deploy/crds/*.yaml defines, the emulator serves (a status write through /status works)."""
    docs = [d for p in sorted((REPO / "deploy" / "crds").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    crds = [d for d in docs if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    if not crds:
        pytest.skip("no deploy/crds/*.yaml yet")
    async with running_emulator() as env:
        custom = CustomObjectsApi(env.client)
        for crd in crds:
            for rt in env.emulator.add_crd(crd):
                ns = NAMESPACE if rt.namespaced else None
                body = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": "x"}}
                if ns:
                    await custom.create_namespaced_custom_object(rt.group, rt.version, ns, rt.plural, body)
                else:
                    await custom.create_cluster_custom_object(rt.group, rt.version, rt.plural, body)
                got = env.emulator.store.get(rt, ns or "", "x")
                assert got["kind"] == rt.kind


async def test_api_client_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """api_client(): a missing file, a broken kubeconfig, an unknown context and no config at all each give a
    one-line KubeConfigError."""
    from magw.sources.kube.client import KubeConfigError

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    good = write_kubeconfig(tmp_path / "good", "unix:///nonexistent.sock")
    for args, kw in (((tmp_path / "missing",), {}), ((broken,), {}), ((good,), {"context": "nope"}), ((), {})):
        with pytest.raises(KubeConfigError) as err:
            await api_client(*args, **kw)
        assert "\n" not in str(err.value) and str(err.value)


def test_main_serves_until_sigterm(tmp_path: Path) -> None:
    """python -m magw.kubeemu --socket S --pidfile P --state F: loads the state, writes the pidfile once it
    serves, answers a real client, and exits 0 on SIGTERM removing socket and pidfile."""
    sock, pidfile, state = tmp_path / "k.sock", tmp_path / "k.pid", tmp_path / "state.yaml"
    state.write_text(
        yaml.safe_dump_all(
            [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"addresses": []}},
                {"kind": "List", "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]},
            ]
        )
    )
    cmd = [sys.executable, "-m", "magw.kubeemu", "--socket", str(sock), "--pidfile", str(pidfile)]
    proc = subprocess.Popen([*cmd, "--state", str(state), "--bookmark-interval", "1"], cwd=REPO, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not pidfile.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the emulator did not come up"
            time.sleep(0.05)
        assert int(pidfile.read_text()) == proc.pid

        async def read() -> list[str]:
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "unix://" + str(sock))
            client = await api_client(kubeconfig)
            async with client:
                nodes = await CoreV1Api(client).list_node()
                namespaces = await CoreV1Api(client).list_namespace()
            return [n.metadata.name for n in nodes.items + namespaces.items]

        assert asyncio.run(read()) == ["n1", NAMESPACE]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert not sock.exists() and not pidfile.exists()
        assert proc.stderr is not None and b"serving on unix://" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
