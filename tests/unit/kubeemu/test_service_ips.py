"""ClusterIP allocation on the emulator (``Emulator(service_ips=...)``, ``--service-ip-range``;
magw.kubeemu.serviceips): a core v1 Service POSTed without ``spec.clusterIP`` gets the first free address of the
range, over HTTP on a unix socket as a client sees it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from ipaddress import IPv4Network
from typing import Any

import aiohttp
import pytest

from magw.kubeemu import serviceips
from magw.kubeemu.__main__ import parse_args
from magw.kubeemu.errors import ApiError
from tests.support.kubeemu_fixtures import http_emulator

NS = "verify"
RANGE = IPv4Network("10.96.0.0/24")


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with http_emulator(service_ips=RANGE) as s:
        yield s


def _service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}], **spec},
    }


def _url(namespace: str = NS, name: str = "") -> str:
    return f"http://kube/api/v1/namespaces/{namespace}/services" + (f"/{name}" if name else "")


async def _create(session: aiohttp.ClientSession, svc: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    """POST ``svc``; the Service answered, checked to be the one stored."""
    async with session.post(_url(namespace), json=svc) as r:
        assert r.status == 201, await r.text()
        created: dict[str, Any] = await r.json()
    async with session.get(_url(namespace, svc["metadata"]["name"])) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["spec"] == created["spec"]
    return created


async def _names(session: aiohttp.ClientSession) -> set[str]:
    async with session.get(_url()) as r:
        assert r.status == 200, await r.text()
        return {item["metadata"]["name"] for item in (await r.json())["items"]}


# --- over HTTP ----------------------------------------------------------------------------------------------------


async def test_a_service_without_cluster_ip_gets_the_first_host(session: aiohttp.ClientSession) -> None:
    spec = (await _create(session, _service("web")))["spec"]
    assert spec["clusterIP"] == "10.96.0.1"
    assert spec["clusterIPs"] == ["10.96.0.1"]
    assert spec["ports"] == [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]  # the rest as given


async def test_the_next_service_gets_the_next_host(session: aiohttp.ClientSession) -> None:
    ips = [(await _create(session, _service(f"s{i}")))["spec"]["clusterIP"] for i in range(3)]
    assert ips == ["10.96.0.1", "10.96.0.2", "10.96.0.3"]


async def test_an_empty_cluster_ip_is_allocated(session: aiohttp.ClientSession) -> None:
    spec = (await _create(session, _service("web", clusterIP="")))["spec"]
    assert spec["clusterIP"] == "10.96.0.1"
    assert spec["clusterIPs"] == ["10.96.0.1"]


async def test_the_range_is_shared_by_all_namespaces(session: aiohttp.ClientSession) -> None:
    a = (await _create(session, _service("web"), namespace="a"))["spec"]["clusterIP"]
    b = (await _create(session, _service("web"), namespace="b"))["spec"]["clusterIP"]
    assert (a, b) == ("10.96.0.1", "10.96.0.2")


async def test_a_given_cluster_ip_another_service_has_is_422(session: aiohttp.ClientSession) -> None:
    first = (await _create(session, _service("first")))["spec"]["clusterIP"]
    async with session.post(_url(), json=_service("second", clusterIP=first)) as r:
        assert r.status == 422, await r.text()
        status = await r.json()
    assert status["reason"] == "Invalid" and "provided IP is already allocated" in status["message"]
    assert await _names(session) == {"first"}
    kept = (await _create(session, _service("third", clusterIP="10.96.7.7")))["spec"]
    assert kept["clusterIPs"] == ["10.96.7.7"]


async def test_a_given_cluster_ip_is_kept_then_skipped(session: aiohttp.ClientSession) -> None:
    given = (await _create(session, _service("fixed", clusterIP="10.96.0.1")))["spec"]
    assert given["clusterIP"] == "10.96.0.1"
    assert (await _create(session, _service("next")))["spec"]["clusterIP"] == "10.96.0.2"


async def test_headless_and_external_name_services_get_none(session: aiohttp.ClientSession) -> None:
    headless = (await _create(session, _service("headless", clusterIP="None")))["spec"]
    assert headless["clusterIP"] == "None"
    assert headless.get("clusterIPs", ["None"]) == ["None"]  # no address in it (a real server puts ["None"])
    external = (await _create(session, _service("db", type="ExternalName", externalName="db.example.com")))["spec"]
    assert "clusterIP" not in external and "clusterIPs" not in external
    # neither used an address
    assert (await _create(session, _service("web")))["spec"]["clusterIP"] == "10.96.0.1"


async def test_a_deleted_services_address_is_free_again(session: aiohttp.ClientSession) -> None:
    await _create(session, _service("first"))
    await _create(session, _service("second"))
    async with session.delete(_url(NS, "first")) as r:
        assert r.status == 200, await r.text()
    assert (await _create(session, _service("third")))["spec"]["clusterIP"] == "10.96.0.1"


async def test_other_kinds_get_no_cluster_ip(session: aiohttp.ClientSession) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "magw:dev"}]},
    }
    async with session.post(f"http://kube/api/v1/namespaces/{NS}/pods", json=pod) as r:
        assert r.status == 201, await r.text()
        created = await r.json()
    assert "clusterIP" not in created["spec"] and "clusterIPs" not in created["spec"]
    assert (await _create(session, _service("web")))["spec"]["clusterIP"] == "10.96.0.1"


async def test_without_a_range_nothing_is_allocated() -> None:
    async with http_emulator() as session:
        spec = (await _create(session, _service("web")))["spec"]
        assert "clusterIP" not in spec and "clusterIPs" not in spec
        kept = (await _create(session, _service("fixed", clusterIP="10.96.0.9")))["spec"]
        assert kept["clusterIP"] == "10.96.0.9"
        assert "clusterIPs" not in kept


async def test_a_full_range_answers_an_internal_error() -> None:
    pool = IPv4Network("10.96.0.0/30")  # hosts .1 and .2
    async with http_emulator(service_ips=pool) as session:
        ips = [(await _create(session, _service(name)))["spec"]["clusterIP"] for name in ("a", "b")]
        assert ips == ["10.96.0.1", "10.96.0.2"]
        async with session.post(_url(), json=_service("c")) as r:
            assert r.status == 500, await r.text()
            status = await r.json()
        assert status["kind"] == "Status" and status["status"] == "Failure"
        assert status["code"] == 500 and status["reason"] == "InternalError"
        assert status["message"] == "Internal error occurred: failed to allocate a serviceIP: 10.96.0.0/30 is full"
        assert await _names(session) == {"a", "b"}  # nothing created
        # a headless Service or one with its address still goes in
        await _create(session, _service("headless", clusterIP="None"))
        await _create(session, _service("given", clusterIP="10.96.1.9"))
        assert await _names(session) == {"a", "b", "headless", "given"}


# --- the functions ------------------------------------------------------------------------------------------------


def test_allocate_fills_the_body_in_place() -> None:
    body = _service("web")
    assert serviceips.allocate(body, {"10.96.0.1", "None"}, RANGE) is None
    assert body["spec"]["clusterIP"] == "10.96.0.2"
    assert body["spec"]["clusterIPs"] == ["10.96.0.2"]


@pytest.mark.parametrize("body", [None, [], "x", {"metadata": {"name": "x"}}, {"spec": None}, {"spec": []}])
def test_allocate_leaves_what_is_no_service_body_alone(body: Any) -> None:
    before = repr(body)
    serviceips.allocate(body, (), RANGE)
    assert repr(body) == before


def test_allocate_raises_an_api_error_when_full() -> None:
    pool = IPv4Network("10.0.0.0/30")
    with pytest.raises(ApiError) as err:
        serviceips.allocate(_service("web"), ["10.0.0.1", "10.0.0.2"], pool)
    assert (err.value.code, err.value.reason) == (500, "InternalError")
    assert "failed to allocate a serviceIP" in err.value.message


def test_cluster_ips_are_those_of_the_services_with_a_spec() -> None:
    services = [_service("a", clusterIP="10.0.0.1"), _service("b", clusterIP="10.0.0.7"), {"metadata": {}}]
    assert serviceips.cluster_ips(services) == {"10.0.0.1", "10.0.0.7"}


@pytest.mark.parametrize(
    ("value", "network"),
    [
        ("10.96.0.0/12", IPv4Network("10.96.0.0/12")),
        ("10.96.0.0/30", IPv4Network("10.96.0.0/30")),
        ("10.96.0.5/24", IPv4Network("10.96.0.0/24")),  # host bits are dropped
    ],
)
def test_parse_range(value: str, network: IPv4Network) -> None:
    assert serviceips.parse_range(value) == network


@pytest.mark.parametrize("value", ["10.96.0.0/31", "10.96.0.0/32", "10.96.0.7"])
def test_parse_range_refuses_fewer_than_4_addresses(value: str) -> None:
    with pytest.raises(ValueError, match="too small a range"):
        serviceips.parse_range(value)


@pytest.mark.parametrize("value", ["10.96.0.0/33", "fd00::/108", "not-a-cidr"])
def test_parse_range_refuses_what_is_no_ipv4_range(value: str) -> None:
    with pytest.raises(ValueError):
        serviceips.parse_range(value)


def test_the_command_line_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--socket", "k.sock", "--service-ip-range", "10.96.0.0/16"]).service_ip_range == IPv4Network(
        "10.96.0.0/16"
    )
    assert parse_args(["--socket", "k.sock"]).service_ip_range is None
    with pytest.raises(SystemExit):
        parse_args(["--socket", "k.sock", "--service-ip-range", "10.96.0.0/31"])
    assert "--service-ip-range" in capsys.readouterr().err
