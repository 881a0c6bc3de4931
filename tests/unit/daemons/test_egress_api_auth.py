"""magw-egress's API with bearer tokens (``--source kube`` over TCP): TokenReview and SubjectAccessReview against
the API server emulator's tokens and RBAC objects. Each refusal has its status and writes nothing (the EgressVIP's
resourceVersion is unchanged); a token the RBAC allows works; master_notify only from the agents' identity; the
API server unreachable refuses (503), never allows. The API is served on a unix socket here (the auth layer does
not care where the bytes come from; no TCP port on the host)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from kubernetes_asyncio.client import CustomObjectsApi

from magw.daemons.egressgw.api import serve
from magw.daemons.egressgw.auth import KubeAuth
from magw.daemons.egressgw.kube import kube_controller
from magw.daemons.egressgw.main import main, parser
from magw.daemons.egressgw.reviews import KubeReviewer
from magw.daemons.egressgw.tls import serving_problem
from magw.kubeemu.rbac import parse_token_file
from magw.sources.kube.client import api_client, write_kubeconfig
from magw.sources.kube.egressgw_store import ApiThread
from tests.support import egress_kube_objects as eko
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures

AGENT = f"system:serviceaccount:{ko.NS}:magw-egress-agent"
TOKENS = f"""\
agent-token,{AGENT},u1
blog-token,system:serviceaccount:blog:app,u2
shop-token,system:serviceaccount:shop:app,u3
nobody-token,nobody,u4,"people,staff"
"""


def _rbac() -> list[dict[str, Any]]:
    rbac = "rbac.authorization.k8s.io/v1"
    binder = {"apiGroups": ["submariner.io"], "resources": ["egressvips"], "verbs": ["bind", "unbind"]}
    return [
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "egressvip-binder"}, "rules": [binder]},
        {
            "apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "app-binds", "namespace": "blog"},
            "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "blog"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "egressvip-binder"},
        },
        {
            "apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "egress-agent"},
            "rules": [{"apiGroups": ["submariner.io"], "resources": ["egressvips"], "verbs": ["report"]}],
        },
        {
            "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "egress-agent"},
            "subjects": [{"kind": "ServiceAccount", "name": "magw-egress-agent", "namespace": ko.NS}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "egress-agent"},
        },
        # the people group may read, so nobody-token authenticates and may list but not bind
        {
            "apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "egressvip-reader"},
            "rules": [{"apiGroups": ["submariner.io"], "resources": ["egressvips"], "verbs": ["get", "list"]}],
        },
        {
            "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "people-read"},
            "subjects": [{"kind": "Group", "name": "people"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "egressvip-reader"},
        },
    ]  # fmt: skip


@pytest.fixture
async def env() -> AsyncIterator[kubeemu_fixtures.KubeEnv]:
    """The emulator with tokens on a loop of its own in a thread (the controller's writes block its loop)."""
    async with kubeemu_fixtures.threaded_emulator(ko.NS, tokens=parse_token_file(TOKENS)) as env:
        eko.serve_egress_crds(env.emulator)
        env.emulator.load([*ko.east(), *eko.world(), *_rbac()])
        yield env


@contextlib.asynccontextmanager
async def api(
    env: kubeemu_fixtures.KubeEnv, review_kubeconfig: Path | None = None
) -> AsyncIterator[aiohttp.ClientSession]:
    """The controller over the emulator and its API with KubeAuth (reviews through ``review_kubeconfig``)."""
    args = argparse.Namespace(cluster="east", namespace=ko.NS)
    thread = await asyncio.to_thread(ApiThread, env.kubeconfig)
    review_api = await api_client(review_kubeconfig or env.kubeconfig)
    controller, source = kube_controller(args, env.client, thread)
    source_task = asyncio.create_task(source.run())
    sock = env.directory / "egress.sock"
    auth = KubeAuth(KubeReviewer(review_api, timeout=3.0), agent_users=[AGENT], ttl=10.0)
    runner, _ = await serve(controller, socket_path=sock, auth=auth, vip_namespace=ko.NS)
    try:
        await kubeemu_fixtures.until(lambda: _ready(controller), what="the first snapshot", timeout=10.0)
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as session:
            yield session
    finally:
        await runner.cleanup()
        source.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await source_task
        await review_api.close()
        await asyncio.to_thread(thread.close)


async def _ready(controller: Any) -> bool:
    try:
        return bool(controller.fresh().egressgw.vips)
    except Exception:  # NotReady until the first snapshot
        return False


async def _post(
    session: aiohttp.ClientSession, path: str, body: dict[str, str], token: str | None
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with session.post(f"http://egress{path}", json=body, headers=headers) as r:
        text = await r.text()
        assert "\n" not in text.strip()
        return r.status, await r.json(content_type=None)


async def _rv(env: kubeemu_fixtures.KubeEnv, name: str) -> tuple[str, Any]:
    obj = await CustomObjectsApi(env.client).get_namespaced_custom_object(
        "submariner.io", "v1alpha1", ko.NS, "egressvips", name
    )
    return obj["metadata"]["resourceVersion"], obj["spec"]["bindings"]


BIND_C_BLOG = {"action": "bind", "vip": "c", "namespace": "blog"}


@pytest.mark.parametrize(
    ("token", "status", "says"),
    [
        (None, 401, "no bearer token"),
        ("not-a-token", 401, "not valid"),
        ("nobody-token", 403, "nobody may not bind"),
        ("shop-token", 403, "system:serviceaccount:shop:app may not bind"),  # another namespace's token
        ("agent-token", 403, "may not bind"),
    ],
)
async def test_refused_bindings_write_nothing(
    env: kubeemu_fixtures.KubeEnv, token: str | None, status: int, says: str
) -> None:
    async with api(env) as session:
        before = await _rv(env, "c")
        code, answer = await _post(session, "/vip", BIND_C_BLOG, token)
        assert code == status and says in answer["error"], answer
        # the same request by address: the SAR names the VIP, not what the caller called it
        code, answer = await _post(session, "/vip", {**BIND_C_BLOG, "vip": "192.0.2.12"}, token)
        assert code == status, answer
        assert await _rv(env, "c") == before


async def test_a_namespace_token_binds_its_own_namespace_only(env: kubeemu_fixtures.KubeEnv) -> None:
    async with api(env) as session:
        before = await _rv(env, "c")
        code, answer = await _post(session, "/vip", {"action": "bind", "vip": "c", "namespace": "shop"}, "blog-token")
        assert code == 403, answer
        assert await _rv(env, "c") == before
        code, answer = await _post(session, "/vip", BIND_C_BLOG, "blog-token")
        assert code == 200, answer
        assert (await _rv(env, "c"))[1] == [{"namespace": "blog"}]
        # blog may bind and unbind, but not notify or read
        code, _ = await _post(session, "/vip", {"action": "notify", "vip": "c"}, "blog-token")
        assert code == 403
        async with session.get("http://egress/vip", headers={"Authorization": "Bearer blog-token"}) as r:
            assert r.status == 403
        async with session.get("http://egress/vip", headers={"Authorization": "Bearer nobody-token"}) as r:
            assert r.status == 200
            assert sorted(v["vip"]["name"] for v in (await r.json())["vips"]) == ["a", "b", "c"]


async def test_master_notify_only_from_the_agents_identity(env: kubeemu_fixtures.KubeEnv) -> None:
    report = {"vip": "c", "node": "e-gw2", "state": "MASTER"}
    async with api(env) as session:
        before = await _rv(env, "c")
        for token in ("blog-token", "nobody-token"):
            code, answer = await _post(session, "/master_notify", report, token)
            assert code == 403 and "not an egress agent" in answer["error"], answer
        assert await _rv(env, "c") == before
        code, answer = await _post(session, "/master_notify", report, "agent-token")
        assert code == 200, answer
        obj = await CustomObjectsApi(env.client).get_namespaced_custom_object(
            "submariner.io", "v1alpha1", ko.NS, "egressvips", "c"
        )
        assert obj["status"]["holder"] == "e-gw2"


async def test_reviews_unreachable_refuse(env: kubeemu_fixtures.KubeEnv) -> None:
    dead = write_kubeconfig(env.directory / "dead.kubeconfig", "unix://" + str(env.directory / "nothing.sock"), ko.NS)
    async with api(env, review_kubeconfig=dead) as session:
        before = await _rv(env, "c")
        code, answer = await _post(session, "/vip", BIND_C_BLOG, "blog-token")
        assert code == 503 and "cannot review the token" in answer["error"], answer
        code, answer = await _post(session, "/master_notify", {"vip": "c", "node": "e-gw2"}, "agent-token")
        assert code == 503, answer
        assert await _rv(env, "c") == before


@pytest.mark.parametrize(
    ("extra", "says", "insecure_starts"),
    [
        (["--source", "file", "--broker-dir", "{d}", "--listen", "127.0.0.1:0"], "--listen with --source file", True),
        (["--listen", "127.0.0.1:0"], "--listen: give --tls-cert-file and --tls-key-file", True),
        (["--listen", "127.0.0.1:0", "--tls-cert-file", "c"], "give both", False),
        (["--source", "file", "--broker-dir", "{d}", "--socket", "{d}/s", "--tls-key-file", "k",
          "--tls-cert-file", "c"], "are for --listen", False),
    ],
)  # fmt: skip
def test_no_tcp_without_tls_and_auth_unless_said_loudly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str, insecure_starts: bool
) -> None:
    kube = ["--source", "kube", "--kubeconfig", str(env_kubeconfig(tmp_path))]
    flags = [a.replace("{d}", str(tmp_path)) for a in extra]
    argv = ["--cluster", "east", *([] if "--source" in extra else kube), *flags]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and says in capsys.readouterr().err
    loud = serving_problem(parser().parse_args([*argv, "--insecure-unauthenticated-http"]))
    assert (loud is None) == insecure_starts, loud


def env_kubeconfig(directory: Path) -> Path:
    return write_kubeconfig(directory / "kc", "unix://" + str(directory / "none.sock"), ko.NS)


async def test_the_socket_is_its_owners_only(env: kubeemu_fixtures.KubeEnv) -> None:
    args = argparse.Namespace(cluster="east", namespace=ko.NS)
    thread = await asyncio.to_thread(ApiThread, env.kubeconfig)
    try:
        controller, _ = kube_controller(args, env.client, thread)
        sock = env.directory / "owner.sock"
        runner, _ = await serve(controller, socket_path=sock)
        try:
            assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        finally:
            await runner.cleanup()
        runner, _ = await serve(controller, socket_path=env.directory / "group.sock", socket_mode=0o660, socket_group=0)
        try:
            st = os.stat(env.directory / "group.sock")
            assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == 0
        finally:
            await runner.cleanup()
    finally:
        await asyncio.to_thread(thread.close)


async def test_no_token_reaches_a_log_or_an_answer(
    env: kubeemu_fixtures.KubeEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """Tokens are secrets: after good, refused and unknown tokens (bind, read, report), none of them appears in any
    log event of the controller or the emulator (structlog and the logging module, at debug) or in any answer."""
    tokens = ("blog-token", "agent-token", "nobody-token", "zz-unknown-token-5f3a9c")
    answers: list[str] = []
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        async with api(env) as session:
            for token in tokens:
                for path, body in (("/vip", BIND_C_BLOG), ("/master_notify", {"vip": "c", "node": "e-gw2"})):
                    answers.append(repr(await _post(session, path, body, token)))
                async with session.get("http://egress/vip", headers={"Authorization": f"Bearer {token}"}) as r:
                    answers.append(await r.text())
    assert any(a.startswith("(200") for a in answers) and any(a.startswith("(401") for a in answers)
    logged = [repr(e) for e in events] + [r.getMessage() + repr(r.__dict__) for r in caplog.records]
    assert logged, "nothing was logged: the check would be empty"
    leaks = [f"{t} in {where[:200]}" for t in tokens for where in [*logged, *answers] if t in where]
    assert leaks == []
