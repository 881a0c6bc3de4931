"""TLS between the egress agent and magw-egress, with certificates made by ``openssl`` (Debian's, in setup.sh's
base system) in a temp dir: plain HTTP to the TLS API fails; the agent's Reporter with the right CA delivers its
report with its bearer token (read from --token-file); with a wrong CA it refuses the server and delivers
nothing. Server and client run on an event loop in a thread moved into a throwaway network namespace (setns of
that thread only), so the TCP port is the namespace's, never the host's."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from structlog.testing import capture_logs

from magw.daemons.egressgw.tls import server_context
from magw.daemons.egressgw_agent.app import Reporter
from tests.support import kubeemu_fixtures
from tests.support.netns import netns

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")]
HOST = "magw-egress.submariner-operator.svc"
CLONE_NEWNET = 0x40000000


def in_netns(ns: str, body: Callable[[], Awaitable[None]]) -> None:
    """Run ``body`` on a fresh event loop in a thread that has joined namespace ``ns``; re-raise its failure."""
    failure: list[BaseException] = []

    def thread() -> None:
        fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)
        try:
            asyncio.run(asyncio.wait_for(_coro(body), 60))
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=thread, name=f"netns-{ns}")
    worker.start()
    worker.join(90)
    assert not worker.is_alive(), "the test's loop did not end"
    if failure:
        raise failure[0]


async def _coro(body: Callable[[], Awaitable[None]]) -> None:
    await body()


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _server_cert(directory: Path, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    key, csr, cert, ext = (directory / f"server.{x}" for x in ("key", "csr", "crt", "ext"))
    ext.write_text(f"subjectAltName=DNS:{HOST},DNS:magw-egress,IP:127.0.0.1\n")
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=magw-egress",
                    "-keyout", str(key), "-out", str(csr)], check=True, capture_output=True)  # fmt: skip
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
                    "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(cert)],
                   check=True, capture_output=True)  # fmt: skip
    return cert, key


@contextlib.asynccontextmanager
async def tls_api(tmp_path: Path) -> AsyncIterator[tuple[Path, str, Path, list[tuple[str, Any]]]]:
    """A stand-in for magw-egress's master_notify on TLS at 127.0.0.1 (of the namespace) recording what it got."""
    ca = (tmp_path / "ca.crt", tmp_path / "ca.key")
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    seen: list[tuple[str, Any]] = []

    async def notify(request: web.Request) -> web.Response:
        seen.append((request.headers.get("Authorization", ""), await request.json()))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/master_notify", notify)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(str(cert), str(key)))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield tmp_path, f"127.0.0.1:{port}", ca[0], seen
    finally:
        await runner.cleanup()


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    _server_cert(tmp_path, _ca(tmp_path, "ca"))
    return tmp_path


@pytest.fixture
def ns() -> Iterator[str]:
    with netns("magwt-etls") as name:
        yield name


def test_plain_http_to_the_tls_api_fails(certs: Path, ns: str) -> None:
    async def body() -> None:
        async with tls_api(certs) as (_, where, _ca_file, seen):
            async with aiohttp.ClientSession() as session:
                with pytest.raises(aiohttp.ClientError):
                    async with session.post(f"http://{where}/master_notify", json={"vip": "a"}) as r:
                        await r.read()
            assert seen == []

    in_netns(ns, body)


def test_the_agent_with_the_ca_reports_with_its_token(certs: Path, ns: str) -> None:
    token = certs / "token"
    token.write_text("agent-token\n")

    async def body() -> None:
        async with tls_api(certs) as (_, where, ca, seen):
            reporter = Reporter("e-gw1", socket=None, url=f"https://{where}", token_file=str(token), ca_file=str(ca))
            try:
                await reporter.report("c", True, "now")
                await kubeemu_fixtures.until(lambda: bool(seen), what="the report", timeout=10.0)
            finally:
                await reporter.close()
            assert seen == [("Bearer agent-token", {"vip": "c", "node": "e-gw1", "state": "MASTER"})]

    in_netns(ns, body)


def test_the_agent_with_a_wrong_ca_refuses_the_server(certs: Path, ns: str) -> None:
    other = certs / "other"
    other.mkdir()
    wrong_ca, _ = _ca(other, "other-ca")
    token = certs / "token"
    token.write_text("agent-token")

    async def body() -> None:
        async with tls_api(certs) as (_, where, _ca_file, seen):
            url = f"https://{where}"
            reporter = Reporter("e-gw1", socket=None, url=url, token_file=str(token), ca_file=str(wrong_ca))
            with capture_logs() as logs:
                try:
                    await reporter.report("c", True, "now")
                    await kubeemu_fixtures.until(lambda: _failed_twice(logs), what="two refused tries", timeout=15)
                finally:
                    await reporter.close()
            assert seen == []
            errors = [str(e.get("error", "")).lower() for e in logs if e["event"] == "egress_agent.report_failed"]
            assert errors and all("certificate" in error for error in errors), errors

    in_netns(ns, body)


def _failed_twice(logs: list[dict[str, Any]]) -> bool:
    return sum(e["event"] == "egress_agent.report_failed" for e in logs) >= 2
