"""The seed's HTTP API (``vip`` bind/unbind/notify, ``master_notify``) on a real aiohttp server on a unix socket,
spoken to by a real HTTP client: answers carry the VIP and its status as written; every bad request gets
400/404/409 with one line of JSON and leaves the broker directory byte-identical."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from magw.controllers.egressgw.controller import EgressController
from magw.daemons.egressgw.api import serve
from magw.sources import FileBroker
from magw.sources.file.egressgw_store import EgressStore
from tests.support.broker_docs import BrokerDocuments, egress_vip, files


class Client:
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        data = body if isinstance(body, str) else None
        kwargs: dict[str, Any] = {"data": data} if data is not None else {"json": body}
        async with self.session.post(f"http://egress{path}", **kwargs) as r:
            return r.status, await r.json()

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.session.get(f"http://egress{path}") as r:
            return r.status, await r.json()


@pytest.fixture
async def api(tmp_path: Path, broker_documents: BrokerDocuments) -> AsyncIterator[tuple[Path, Client]]:
    broker_dir = tmp_path / "broker"
    broker_dir.mkdir()
    (broker_dir / "base.yaml").write_text(broker_documents("egress-east.yaml"))
    (broker_dir / "vip-a.yaml").write_text(egress_vip("a", 10, "[{namespace: shop}]"))
    (broker_dir / "vip-b.yaml").write_text(egress_vip("b", 11))
    ctl = EgressController(source=FileBroker(broker_dir, local_cluster="east"), store=EgressStore(broker_dir, "east"))
    ctl.reconcile()
    sock = tmp_path / "api.sock"
    runner, url = await serve(ctl, socket_path=sock)
    assert url == f"unix:{sock}"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as session:
            yield broker_dir, Client(session)
    finally:
        await asyncio.wait_for(runner.cleanup(), 10)


async def test_bind_unbind_rebind_through_the_api(api: tuple[Path, Client]) -> None:
    _, c = api
    status, body = await c.post("/vip", {"action": "bind", "vip": "192.0.2.11", "namespace": "shop", "service": "web"})
    assert status == 200
    assert body["vip"] == {
        "name": "b",
        "vip": "192.0.2.11",
        "vrid": 11,
        "candidates": ["n1", "n2"],
        "bindings": [{"namespace": "shop", "service": "web"}],
    }
    assert body["status"] == {"holder": "", "since": "", "services": ["shop/web"]}
    status, body = await c.get("/vip/a")
    assert status == 200 and body["status"]["services"] == ["shop/db"]
    status, body = await c.post("/vip", {"action": "unbind", "vip": "b", "namespace": "shop", "service": "web"})
    assert status == 200 and body["status"]["services"] == []
    status, body = await c.post("/vip", {"action": "bind", "vip": "b", "namespace": "blog"})
    assert status == 200 and body["status"]["services"] == ["blog/api"]
    status, body = await c.get("/vip")
    assert status == 200 and [v["vip"]["name"] for v in body["vips"]] == ["a", "b"]
    assert [v["status"]["services"] for v in body["vips"]] == [["shop/db", "shop/web"], ["blog/api"]]


async def test_master_notify_by_node_name_or_ip_and_notify_only(api: tuple[Path, Client]) -> None:
    d, c = api
    status, body = await c.post("/master_notify", {"vip": "192.0.2.10", "node_ip": "172.18.0.3", "mac": "aa:bb"})
    assert status == 200 and body["status"]["holder"] == "n2" and body["status"]["since"].endswith("Z")
    status, body = await c.post("/master_notify", {"vip": "a", "node": "n2", "state": "BACKUP"})
    assert status == 200 and body["status"]["holder"] == ""
    (d / "egress-status@east@a.yaml").unlink()
    status, body = await c.post("/vip", {"action": "notify", "vip": "a"})
    assert status == 200 and body["status"]["services"] == ["shop/db", "shop/web"]
    assert (d / "egress-status@east@a.yaml").exists()


BAD: list[tuple[str, str, Any, int, str]] = [
    ("not-json", "/vip", "{nope", 400, "the body is not JSON"),
    ("not-object", "/vip", [1], 400, "the body must be a JSON object, got list"),
    ("unknown-field", "/vip", {"action": "bind", "vip": "a", "ns": "x"}, 400,
     "ns: unknown field (known: action, vip, namespace, service)"),
    ("not-string", "/vip", {"action": "bind", "vip": 10}, 400, "vip: expected a string, got int"),
    ("no-action", "/vip", {"vip": "a"}, 400, "action: required (bind, unbind or notify)"),
    ("bad-action", "/vip", {"action": "move", "vip": "a"}, 400, "action: 'move' is not bind, unbind or notify"),
    ("outside-range", "/vip", {"action": "unbind", "vip": "10.9.9.9", "namespace": "shop"}, 404,
     "VIP 10.9.9.9 is outside the egress VIP ranges (192.0.2.0/24)"),
    ("no-namespace", "/vip", {"action": "bind", "vip": "b"}, 400, "namespace: required"),
    ("unknown-vip", "/vip", {"action": "bind", "vip": "zz", "namespace": "shop"}, 404, "no EgressVIP named 'zz'"),
    ("unknown-namespace", "/vip", {"action": "bind", "vip": "b", "namespace": "nope"}, 404,
     "namespace nope does not exist"),
    ("unknown-service", "/vip", {"action": "bind", "vip": "b", "namespace": "shop", "service": "x"}, 404,
     "service shop/x does not exist"),
    ("bound-twice", "/vip", {"action": "bind", "vip": "b", "namespace": "shop"}, 409,
     "namespace shop is already bound to VIP a (192.0.2.10)"),
    ("not-bound", "/vip", {"action": "unbind", "vip": "b", "namespace": "blog"}, 409,
     "namespace blog is not bound to VIP b"),
    ("notify-extra", "/vip", {"action": "notify", "vip": "a", "namespace": "shop"}, 400, "notify takes only vip"),
    ("notify-node-and-ip", "/master_notify", {"vip": "a", "node": "n1", "node_ip": "172.18.0.2"}, 400,
     "give exactly one of node and node_ip"),
    ("notify-bad-ip", "/master_notify", {"vip": "a", "node_ip": "172.18.0"}, 400,
     "node_ip: '172.18.0' is not an IPv4 address"),
    ("notify-unknown-ip", "/master_notify", {"vip": "a", "node_ip": "172.18.0.9"}, 404,
     "no node of cluster east has address 172.18.0.9"),
    ("notify-bad-state", "/master_notify", {"vip": "a", "node": "n1", "state": "UP"}, 400,
     "state: 'UP' is not MASTER, BACKUP, FAULT or STOP"),
    ("notify-non-candidate", "/master_notify", {"vip": "a", "node": "n3"}, 409,
     "node n3 is not a candidate of VIP a (n1, n2)"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body", "code", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
async def test_bad_input_gets_one_line_and_changes_nothing(
    api: tuple[Path, Client], path: str, body: Any, code: int, message: str
) -> None:
    d, c = api
    before = files(d)
    status, answer = await c.post(path, body)
    assert (status, answer) == (code, {"error": message})
    assert files(d) == before


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("zz", "no EgressVIP named 'zz'"),
        ("192.0.2.99", "no EgressVIP has address 192.0.2.99"),
        ("10.9.9.9", "VIP 10.9.9.9 is outside the egress VIP ranges (192.0.2.0/24)"),
    ],
)
async def test_a_vip_that_is_not_there_is_404_on_get(api: tuple[Path, Client], ref: str, message: str) -> None:
    """A GET names a resource: not found is 404 whatever the reason, also an address outside the ranges."""
    _, c = api
    assert await c.get(f"/vip/{ref}") == (404, {"error": message})


async def test_unbinding_a_shared_vip_still_used_by_services_is_409_and_changes_nothing(
    api: tuple[Path, Client],
) -> None:
    d, c = api
    status, _ = await c.post("/vip", {"action": "bind", "vip": "a", "namespace": "shop", "service": "web"})
    assert status == 200
    before = files(d)
    status, answer = await c.post("/vip", {"action": "unbind", "vip": "a", "namespace": "shop"})
    assert status == 409
    message = "VIP a is shared by namespace shop and still used by services shop/web: unbind them first"
    assert answer == {"error": message}
    assert files(d) == before


async def test_a_vip_in_a_shared_file_is_refused_with_409(
    api: tuple[Path, Client], broker_documents: BrokerDocuments
) -> None:
    d, c = api
    (d / "vip-b.yaml").unlink()
    (d / "base.yaml").write_text(broker_documents("egress-east.yaml") + "---\n" + egress_vip("b", 11))
    before = files(d)
    status, answer = await c.post("/vip", {"action": "bind", "vip": "b", "namespace": "blog"})
    assert status == 409 and answer["error"].startswith("VIP b is defined in base.yaml together with 9 other")
    assert files(d) == before


async def test_tcp_on_loopback_port_zero(tmp_path: Path, broker_documents: BrokerDocuments) -> None:
    (tmp_path / "base.yaml").write_text(broker_documents("egress-east.yaml"))
    ctl = EgressController(source=FileBroker(tmp_path, local_cluster="east"), store=EgressStore(tmp_path, "east"))
    runner, url = await serve(ctl, host="127.0.0.1", port=0)
    try:
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        async with aiohttp.ClientSession() as s, s.get(f"{url}/vip") as r:
            assert r.status == 200 and await r.json() == {"vips": []}
    finally:
        await asyncio.wait_for(runner.cleanup(), 10)


async def test_the_daemon_serves_runs_passes_and_stops(tmp_path: Path, broker_documents: BrokerDocuments) -> None:
    from magw.daemons.egressgw.app import run
    from magw.daemons.egressgw.main import parser

    broker_dir = tmp_path / "b"
    broker_dir.mkdir()
    (broker_dir / "base.yaml").write_text(broker_documents("egress-east.yaml"))
    (broker_dir / "vip-a.yaml").write_text(egress_vip("a", 10, "[{namespace: blog}]"))
    sock = tmp_path / "d.sock"
    args = parser().parse_args(["--broker-dir", str(broker_dir), "--cluster", "east", "--socket", str(sock)])
    stop = asyncio.Event()
    task = asyncio.create_task(run(args, stop))
    try:
        status_file = broker_dir / "egress-status@east@a.yaml"
        for _ in range(200):  # the first pass writes the status; bounded wait
            if status_file.exists() and sock.exists():
                break
            await asyncio.sleep(0.05)
        assert "blog/api" in status_file.read_text()
        connector = aiohttp.UnixConnector(path=str(sock))
        async with aiohttp.ClientSession(connector=connector) as s, s.get("http://x/vip/a") as r:
            assert r.status == 200 and (await r.json())["status"]["services"] == ["blog/api"]
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert task.done() and task.exception() is None
