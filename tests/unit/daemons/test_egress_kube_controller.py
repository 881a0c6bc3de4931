"""``magw-egress --source kube`` against the API server emulator: statuses land in the EgressVIP status
subresource, the API's bind changes the CR's spec and answers with what it wrote (read-your-writes), holder
reports land in the status, a refused request writes nothing, and a binding change made on a VIP that
changed meanwhile is refused (409) rather than overwriting it. Expected values are written out by hand."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import CustomObjectsApi

from magw.daemons.egressgw.app import run
from magw.daemons.egressgw.main import main, parser
from magw.model.egressgw import EgressBinding, EgressVIP
from magw.sources.file.egressgw_store import StoreRefused
from magw.sources.kube.egressgw_store import ApiThread, KubeEgressStore
from tests.support import egress_kube_objects as eko
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures

until = functools.partial(kubeemu_fixtures.until, timeout=10.0)


@pytest.fixture
async def kube_env() -> AsyncIterator[kubeemu_fixtures.KubeEnv]:
    """The emulator on an event loop of its own, in a thread: the controller's writes block its loop until the
    API answers (as against a real API server), which an emulator on that same loop never would."""
    async with kubeemu_fixtures.threaded_emulator(ko.NS) as env:
        yield env


def _load(env: kubeemu_fixtures.KubeEnv, objects: list[dict[str, Any]]) -> None:
    """Serve the egress CRDs and put ``objects`` in (the emulator's own loop is another thread's: a quick
    synchronous call between its requests, as the emulator's tests do from a test's loop)."""
    eko.serve_egress_crds(env.emulator)
    env.emulator.load(objects)


async def _vip(env: kubeemu_fixtures.KubeEnv, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = await CustomObjectsApi(env.client).get_namespaced_custom_object(
        "submariner.io", "v1alpha1", ko.NS, "egressvips", name
    )
    return obj


@contextlib.asynccontextmanager
async def daemon(env: kubeemu_fixtures.KubeEnv) -> AsyncIterator[aiohttp.ClientSession]:
    sock = env.directory / "egress.sock"
    argv = ["--source", "kube", "--kubeconfig", str(env.kubeconfig), "--namespace", ko.NS, "--cluster", "east"]
    args = parser().parse_args([*argv, "--socket", str(sock), "--interval", "0.2"])
    stop = asyncio.Event()
    task = asyncio.create_task(run(args, stop))
    try:
        await until(lambda: sock.exists() or task.done(), what="the API socket")
        assert not task.done()
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as session:
            yield session
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert task.result() == 0


async def _post(session: aiohttp.ClientSession, path: str, body: dict[str, str]) -> tuple[int, Any]:
    async with session.post(f"http://egress{path}", json=body) as r:
        return r.status, await r.json()


async def test_statuses_bind_and_holder_reports_go_to_the_crs(kube_env: kubeemu_fixtures.KubeEnv) -> None:
    _load(kube_env, [*ko.east(), *eko.world()])
    async with daemon(kube_env) as session:

        async def status(name: str) -> Any:
            return (await _vip(kube_env, name)).get("status")

        await until(lambda: _has(status("b"), {"holder": "", "services": ["shop/db"]}), what="b's status")
        assert await status("a") == {"holder": "e-gw1", "since": eko.SINCE, "services": ["shop/web"]}
        await until(lambda: _has(status("c"), {"holder": "", "services": []}), what="c's status")

        code, answer = await _post(session, "/vip", {"action": "bind", "vip": "c", "namespace": "blog"})
        assert code == 200, answer
        assert answer["vip"]["bindings"] == [{"namespace": "blog"}]  # what was written, not the stale cache
        assert answer["status"]["services"] == ["blog/api"]
        c = await _vip(kube_env, "c")
        assert c["spec"]["bindings"] == [{"namespace": "blog"}]
        assert c["spec"]["vip"] == "192.0.2.12" and c["spec"]["candidates"] == ["e-gw1", "e-gw2"]
        assert c["status"]["services"] == ["blog/api"]

        code, answer = await _post(session, "/master_notify", {"vip": "c", "node": "e-gw2", "state": "MASTER"})
        assert code == 200, answer
        c = await _vip(kube_env, "c")
        assert c["status"]["holder"] == "e-gw2" and c["status"]["since"]

        # refused (shop is a's already): nothing is written
        before = (await _vip(kube_env, "c"))["metadata"]["resourceVersion"]
        code, answer = await _post(session, "/vip", {"action": "bind", "vip": "c", "namespace": "shop"})
        assert code == 409, answer
        assert (await _vip(kube_env, "c"))["metadata"]["resourceVersion"] == before


async def _has(status: Any, expected: dict[str, Any]) -> bool:
    got = await status
    return isinstance(got, dict) and all(got.get(k) == v for k, v in expected.items())


async def test_a_binding_change_on_a_vip_changed_meanwhile_is_refused(kube_env: kubeemu_fixtures.KubeEnv) -> None:
    _load(kube_env, eko.world())
    old = (await _vip(kube_env, "c"))["metadata"]["resourceVersion"]
    patch = {"spec": {"candidates": ["e-gw2"]}}
    await CustomObjectsApi(kube_env.client).patch_namespaced_custom_object(
        "submariner.io", "v1alpha1", ko.NS, "egressvips", "c", patch, _content_type="application/merge-patch+json"
    )
    thread = await asyncio.to_thread(ApiThread, kube_env.kubeconfig)
    try:
        vip = EgressVIP(
            name="c", vip=IPv4Address("192.0.2.12"), vrid=12, candidates=("e-gw1",), bindings=(EgressBinding("blog"),)
        )
        stale = KubeEgressStore(thread, namespace=ko.NS, seen=lambda _name: old)
        with pytest.raises(StoreRefused, match="changed meanwhile"):
            await asyncio.to_thread(stale.write_vip, vip)
        assert (await _vip(kube_env, "c"))["spec"]["bindings"] == []
        fresh = KubeEgressStore(thread, namespace=ko.NS)
        await asyncio.to_thread(fresh.write_vip, vip)
        c = await _vip(kube_env, "c")
        assert c["spec"]["bindings"] == [{"namespace": "blog"}] and c["spec"]["candidates"] == ["e-gw2"]
        assert fresh.written["c"].resource_version == c["metadata"]["resourceVersion"]
    finally:
        await asyncio.to_thread(thread.close)


def test_kube_flags_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--source", "kube", "--broker-dir", str(tmp_path), "--cluster", "east", "--socket", "s"])
    assert exc.value.code == 2 and "--broker-dir: only with --source file" in capsys.readouterr().err
