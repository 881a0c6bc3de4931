"""A Pod's log on the emulator (``GET /api/v1/namespaces/<ns>/pods/<name>/log``, magw.kubeemu.podlogs), served
from the files a lab kubelet writes under ``Emulator(pod_logs=DIR)``, over HTTP on a unix socket.

Pinned to what a real API server answers for ``kubectl logs`` (the ``PodLogOptions`` query: container, tailLines,
limitBytes, follow, previous) and to its error messages for a pod that has several containers or has not started.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest

from magw.kubeemu import podlogs
from tests.support.kubeemu_fixtures import http_emulator

NS = "verify"
MERGE = "application/merge-patch+json"
LOG = b"line 1\nline 2\nline 3\nline 4\n"


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    root = tmp_path / "pods"
    root.mkdir()
    return root


@pytest.fixture
async def session(tmp_path: Path, logs: Path) -> AsyncIterator[aiohttp.ClientSession]:
    async with http_emulator(pod_logs=logs) as s:
        yield s


def _pod(name: str = "echo", containers: tuple[str, ...] = ("server",)) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": c, "image": "magw:dev", "command": ["iperf3", "-s"]} for c in containers]},
    }


async def _create(session: aiohttp.ClientSession, pod: dict[str, Any]) -> dict[str, Any]:
    async with session.post(f"http://kube/api/v1/namespaces/{NS}/pods", json=pod) as r:
        assert r.status == 201, await r.text()
        created: dict[str, Any] = await r.json()
        return created


def _write(root: Path, pod: dict[str, Any], container: str, data: bytes) -> Path:
    path = podlogs.log_path(root, pod, container)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _url(name: str = "echo", **query: str) -> str:
    return f"http://kube/api/v1/namespaces/{NS}/pods/{name}/log" + (f"?{urlencode(query)}" if query else "")


async def _log(session: aiohttp.ClientSession, name: str = "echo", **query: str) -> bytes:
    async with session.get(_url(name, **query)) as r:
        assert r.status == 200, await r.text()
        assert r.content_type == "text/plain"
        return await r.read()


async def _error(session: aiohttp.ClientSession, code: int, name: str = "echo", **query: str) -> str:
    """The message of the Status a failed log request answers, checking its code and reason."""
    async with session.get(_url(name, **query)) as r:
        assert r.status == code, await r.text()
        status = await r.json()
    assert status["kind"] == "Status" and status["code"] == code
    assert status["reason"] == {400: "BadRequest", 404: "NotFound"}[code]
    message: str = status["message"]
    return message


async def _set_phase(session: aiohttp.ClientSession, name: str, phase: str) -> None:
    url = f"http://kube/api/v1/namespaces/{NS}/pods/{name}/status"
    body = {"status": {"phase": phase}}
    async with session.patch(url, json=body, headers={"Content-Type": MERGE}) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["status"]["phase"] == phase


# --- reads ----------------------------------------------------------------------------------------------------


def test_log_path_is_namespace_name_uid_then_container(tmp_path: Path) -> None:
    """The lab kubelet's layout (magw.lab.kubelet.agent): <dir>/<namespace>_<pod>_<uid>/<container>.log."""
    pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "1234"}}
    assert podlogs.log_path(tmp_path, pod, "c") == tmp_path / "ns_p_1234" / "c.log"


async def test_the_log_file_is_served_as_text(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod())
    assert pod["metadata"]["uid"]
    _write(logs, pod, "server", LOG)
    assert await _log(session) == LOG
    assert await _log(session, container="server") == LOG


async def test_tail_lines_and_limit_bytes(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod())
    _write(logs, pod, "server", LOG)
    assert await _log(session, tailLines="2") == b"line 3\nline 4\n"
    assert await _log(session, tailLines="1") == b"line 4\n"
    assert await _log(session, tailLines="0") == b""
    assert await _log(session, tailLines="100") == LOG
    assert await _log(session, limitBytes="9") == b"line 1\nli"
    assert await _log(session, limitBytes="1000") == LOG
    assert await _log(session, tailLines="2", limitBytes="3") == b"lin"  # the tail first, then the limit


async def test_tail_keeps_a_last_line_without_newline(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod())
    _write(logs, pod, "server", b"a\nb\npartial")
    assert await _log(session, tailLines="2") == b"b\npartial"


async def test_a_pod_with_two_containers_needs_the_container(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod(containers=("server", "client")))
    _write(logs, pod, "server", b"from the server\n")
    _write(logs, pod, "client", b"from the client\n")
    message = await _error(session, 400)
    assert message == "a container name must be specified for pod echo, choose one of: [server client]"
    assert await _log(session, container="server") == b"from the server\n"
    assert await _log(session, container="client") == b"from the client\n"


async def test_an_unknown_container_is_400(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod())
    _write(logs, pod, "server", LOG)
    assert await _error(session, 400, container="sidecar") == "container sidecar is not valid for pod echo"


async def test_a_pod_that_does_not_exist_is_404(session: aiohttp.ClientSession, logs: Path) -> None:
    await _create(session, _pod())
    assert "not found" in await _error(session, 404, name="missing")
    # nor in another namespace
    async with session.get("http://kube/api/v1/namespaces/other/pods/echo/log") as r:
        assert r.status == 404


async def test_a_pod_without_its_log_file_is_waiting_to_start(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod(containers=("server", "client")))
    _write(logs, pod, "server", LOG)
    message = await _error(session, 400, container="client")
    assert message == 'container "client" in pod "echo" is waiting to start: ContainerCreating'
    assert await _log(session, container="server") == LOG


async def test_previous_is_400(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod())
    _write(logs, pod, "server", LOG)
    for value in ("true", "1", "True"):
        message = await _error(session, 400, previous=value)
        assert message == 'previous terminated container "server" in pod "echo" not found'
    assert await _log(session, previous="false") == LOG


@pytest.mark.parametrize(
    ("query", "says"),
    [({"tailLines": "x"}, "tailLines: 'x' is not an integer"), ({"tailLines": "-1"}, "tailLines: must be non-negative"),
     ({"tailLines": "1.5"}, "is not an integer"), ({"limitBytes": "0"}, "limitBytes: must be greater than 0"),
     ({"limitBytes": "-3"}, "limitBytes: must be greater than 0"), ({"limitBytes": ""}, "is not an integer")],
)  # fmt: skip
async def test_bad_numbers_are_400(
    session: aiohttp.ClientSession, logs: Path, query: dict[str, str], says: str
) -> None:
    pod = await _create(session, _pod())
    _write(logs, pod, "server", LOG)
    assert says in await _error(session, 400, **query)


async def test_an_emulator_without_pod_logs_has_every_container_waiting(tmp_path: Path, logs: Path) -> None:
    async with http_emulator() as bare:
        pod = await _create(bare, _pod())
        _write(logs, pod, "server", LOG)  # where an emulator with pod_logs would look: not here
        assert "is waiting to start" in await _error(bare, 400)
        assert "not found" in await _error(bare, 404, name="missing")


async def test_a_pod_created_again_with_the_same_name_does_not_serve_the_old_log(
    session: aiohttp.ClientSession, logs: Path
) -> None:
    first = await _create(session, _pod())
    _write(logs, first, "server", b"the first pod\n")
    assert await _log(session) == b"the first pod\n"
    async with session.delete(f"http://kube/api/v1/namespaces/{NS}/pods/echo") as r:
        assert r.status == 200
    assert "not found" in await _error(session, 404)
    second = await _create(session, _pod())
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert "is waiting to start" in await _error(session, 400)
    _write(logs, second, "server", b"the second pod\n")
    assert await _log(session) == b"the second pod\n"


# --- follow ---------------------------------------------------------------------------------------------------


@pytest.fixture
def fast_follow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podlogs, "FOLLOW_POLL", 0.02)


@pytest.mark.usefixtures("fast_follow")
async def test_follow_streams_what_is_appended_until_the_pod_succeeded(
    session: aiohttp.ClientSession, logs: Path
) -> None:
    pod = await _create(session, _pod())
    path = _write(logs, pod, "server", b"started\n")

    async def follow() -> bytes:
        async with session.get(_url(follow="true")) as r:
            assert r.status == 200 and r.content_type == "text/plain"
            assert await r.content.readexactly(len(b"started\n")) == b"started\n"
            with path.open("ab") as f:
                f.write(b"more 1\n")
            assert await r.content.readexactly(len(b"more 1\n")) == b"more 1\n"
            with path.open("ab") as f:
                f.write(b"last words\n")
            await _set_phase(session, "echo", "Succeeded")  # at once: what was written before is still sent
            return await r.content.read()  # to the end of the stream: the server ends it

    assert await asyncio.wait_for(follow(), 10) == b"last words\n"


@pytest.mark.usefixtures("fast_follow")
async def test_follow_does_not_end_while_the_pod_runs(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod())
    _write(logs, pod, "server", b"")
    await _set_phase(session, "echo", "Running")
    async with session.get(_url(follow="true")) as r:
        assert r.status == 200
        read = asyncio.ensure_future(r.content.read())
        done, _ = await asyncio.wait([read], timeout=0.5)
        assert not done  # several polls later, still open
        await _set_phase(session, "echo", "Failed")
        assert await asyncio.wait_for(read, 10) == b""


@pytest.mark.usefixtures("fast_follow")
async def test_follow_ends_when_the_pod_is_deleted(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod())
    _write(logs, pod, "server", LOG)

    async def follow() -> bytes:
        async with session.get(_url(follow="1", tailLines="1")) as r:
            assert r.status == 200
            assert await r.content.readexactly(len(b"line 4\n")) == b"line 4\n"
            async with session.delete(f"http://kube/api/v1/namespaces/{NS}/pods/echo") as d:
                assert d.status == 200
            return await r.content.read()

    assert await asyncio.wait_for(follow(), 10) == b""


@pytest.mark.usefixtures("fast_follow")
async def test_follow_stops_at_limit_bytes(session: aiohttp.ClientSession, logs: Path) -> None:
    pod = await _create(session, _pod())
    path = _write(logs, pod, "server", b"abc")

    async def follow() -> bytes:
        async with session.get(_url(follow="true", limitBytes="5")) as r:
            assert await r.content.readexactly(3) == b"abc"
            with path.open("ab") as f:
                f.write(b"defgh")
            return await r.content.read()  # the pod still runs: the limit ends the stream

    assert await asyncio.wait_for(follow(), 10) == b"de"
