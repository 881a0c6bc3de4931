"""The controller's HTTP API (a real aiohttp server on a unix socket, a real client) answers 409 with one line to a
bind that would put two Services on one port of a VIP, and writes nothing; a VIP whose conflict was made by hand
shows it in its status."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from magw.controllers.egressgw.controller import EgressController
from magw.daemons.egressgw.api import serve
from magw.sources import FileBroker
from magw.sources.file.egressgw_store import EgressStore
from tests.unit.controllers.port_conflict_world import CLASH, files, make_broker


async def _exchange(broker_dir: Path, sock: Path, method: str, path: str, body: object = None) -> tuple[int, object]:
    ctl = EgressController(source=FileBroker(broker_dir, local_cluster="east"), store=EgressStore(broker_dir, "east"))
    ctl.reconcile()
    runner, _url = await serve(ctl, socket_path=sock)
    try:
        async with (
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as session,
            session.request(method, f"http://egress{path}", json=body) as r,
        ):
            return r.status, await r.json()
    finally:
        await asyncio.wait_for(runner.cleanup(), 10)


async def test_a_bind_that_makes_a_port_conflict_is_409_and_writes_nothing(tmp_path: Path) -> None:
    """POST /vip bind VIP a to namespace blog (web and feed both on 8080): 409, the one-line reason, and every
    file of the broker byte-identical afterwards (the statuses the first pass wrote included)."""
    d = make_broker(tmp_path / "broker")
    EgressController(source=FileBroker(d, local_cluster="east"), store=EgressStore(d, "east")).reconcile()
    before = files(d)
    status, body = await _exchange(d, tmp_path / "api.sock", "POST", "/vip",
                                   {"action": "bind", "vip": "192.0.2.10", "namespace": "blog"})  # fmt: skip
    assert status == 409
    assert body == {
        "error": "port 8080/tcp of VIP a would lead to both blog/feed and blog/web: a VIP's port leads to one "
        "Service (give one of them a VIP of its own)"
    }
    assert files(d) == before


async def test_a_conflict_made_by_hand_is_in_the_vips_status(tmp_path: Path) -> None:
    """GET /vip/a of a VIP whose file binds namespace blog: its status carries the clash line."""
    d = make_broker(tmp_path / "broker", a_bindings="[{namespace: blog}]")
    status, body = await _exchange(d, tmp_path / "api.sock", "GET", "/vip/a")
    assert status == 200 and isinstance(body, dict)
    assert body["status"]["conflicts"] == [CLASH]
