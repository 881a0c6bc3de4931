"""magw-egress's OpenAPI document (``GET /openapi.json``) and schemathesis against it.

The real aiohttp server runs on a unix socket (no port anywhere) on its own event loop in a thread, over a file
broker with two VIPs. schemathesis generates requests from the document (bounded: ``MAGW_API_EXAMPLES``, default
40 per operation), each is sent over the socket, and its answer is checked against the document by schemathesis'
checks (no 5xx; status codes, content types and bodies as documented). A refused request (4xx) must leave the
broker directory byte-identical.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.core.transport import Response

from magw.controllers.egressgw.controller import EgressController
from magw.daemons.egressgw.api import serve
from magw.daemons.egressgw.openapi import document
from magw.sources import FileBroker
from magw.sources.file.egressgw_store import EgressStore
from tests.support.broker_docs import egress_vip, files
from tests.support.paths import DATA

EXAMPLES = int(os.environ.get("MAGW_API_EXAMPLES", "40"))
DOCUMENT = document(bearer=False)  # the unix socket's: no bearer token there
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("egress", timeout=30)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.unix_path)


class Server:
    """The API on ``sock`` over the broker ``broker``, served by a loop in a thread until ``close``."""

    def __init__(self, tmp: Path) -> None:
        self.broker = tmp / "broker"
        self.broker.mkdir()
        (self.broker / "base.yaml").write_text((DATA / "broker" / "egress-east.yaml").read_text())
        (self.broker / "vip-a.yaml").write_text(egress_vip("a", 10, "[{namespace: shop}]"))
        (self.broker / "vip-b.yaml").write_text(egress_vip("b", 11))
        self.sock = tmp / "api.sock"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        source = FileBroker(self.broker, local_cluster="east")
        ctl = EgressController(source=source, store=EgressStore(self.broker, "east"))
        ctl.reconcile()
        self.runner, _ = asyncio.run_coroutine_threadsafe(serve(ctl, socket_path=self.sock), self.loop).result(30)

    def send(self, prepared: requests.PreparedRequest) -> tuple[int, dict[str, list[str]], bytes]:
        conn = _UnixHTTP(str(self.sock))
        try:
            body = prepared.body.encode() if isinstance(prepared.body, str) else prepared.body
            conn.request(str(prepared.method), prepared.path_url, body=body, headers=dict(prepared.headers))
            r = conn.getresponse()
            headers: dict[str, list[str]] = {}
            for k, v in r.getheaders():
                headers.setdefault(k.lower(), []).append(v)
            return r.status, headers, r.read()
        finally:
            conn.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("egress-openapi"))
    try:
        yield s
    finally:
        s.close()


def test_every_route_of_the_app_is_documented_and_nothing_else(server: Server) -> None:
    """The router's routes (read from the running app's own route table) are exactly the document's paths."""
    routes = {(r.method.lower(), r.resource.canonical) for r in server.runner.app.router.routes()}  # type: ignore[union-attr]
    routes -= {("head", path) for _, path in routes}  # aiohttp adds HEAD beside every GET
    documented = {(m, p) for p, ops in DOCUMENT["paths"].items() for m in ops}
    assert routes == documented


def test_the_document_is_served_without_authentication(server: Server) -> None:
    status, headers, body = server.send(requests.Request("GET", "http://egress/openapi.json").prepare())
    assert (status, headers["content-type"][0].split(";")[0]) == (200, "application/json")
    assert json.loads(body) == json.loads(json.dumps(DOCUMENT))


@SCHEMA.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_generated_requests_get_documented_answers_and_refusals_write_nothing(case: Any, server: Server) -> None:
    before = files(server.broker)
    prepared = requests.Request(**case.as_transport_kwargs(base_url="http://egress")).prepare()
    status, headers, content = server.send(prepared)
    response = Response(status_code=status, headers=headers, content=content, request=prepared, elapsed=0, verify=True)
    case.validate_response(response)
    if 400 <= status < 500:
        assert files(server.broker) == before, f"{case.method} {case.path} was refused with {status} but wrote"


def test_the_tcp_document_requires_a_bearer_token_everywhere_but_itself() -> None:
    doc = document(bearer=True)
    assert doc["security"] == [{"bearer": []}]
    assert doc["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert doc["paths"]["/openapi.json"]["get"]["security"] == []
    guarded = [op for path, ops in doc["paths"].items() if path != "/openapi.json" for op in ops.values()]
    assert guarded and all("401" in op["responses"] for op in guarded)
