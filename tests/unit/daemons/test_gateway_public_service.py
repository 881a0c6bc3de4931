"""``magw-gateway --public-service``: the public address and port from the LoadBalancer Service in front of the
gateway (magw.sources.kube.lbservice, docs/load-balancer.md): what is read from a Service, and the daemon
against the emulator publishing it, waiting for a Service without an address, and following a change."""

from __future__ import annotations

import asyncio
import contextlib
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import CoordinationV1Api, CoreV1Api, CustomObjectsApi

from magw.daemons.gateway import main as gateway_main
from magw.sources.kube import lbservice
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures
from tests.support.kube_daemons import daemon

kube_env = kubeemu_fixtures.kube_env
KubeEnv = kubeemu_fixtures.KubeEnv
until = kubeemu_fixtures.until


def service(name: str, ports: list[dict[str, Any]], ingress: list[dict[str, str]] | None = None,
            type_: str = "LoadBalancer") -> dict[str, Any]:  # fmt: skip
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ko.NS},
        "spec": {"type": type_, "ports": ports},
    }
    if ingress is not None:
        obj["status"] = {"loadBalancer": {"ingress": ingress}}
    return obj


UDP = {"name": "cable", "protocol": "UDP", "port": 45001, "targetPort": 4500}


def test_the_only_port_or_the_one_named_after_the_node() -> None:
    one = service("magw-gw-e-gw1", [UDP], [{"ip": "203.0.113.7"}])
    assert lbservice.fronted(one, "e-gw1") == lbservice.Fronted(ip=IPv4Address("203.0.113.7"), port=45001)
    shared = service("magw-gateways", [
        {"name": "magw-e-gw1", "protocol": "UDP", "port": 45001},
        {"name": "magw-e-gw2", "protocol": "UDP", "port": 45002},
    ], [{"ip": "203.0.113.7"}])  # fmt: skip
    assert lbservice.fronted(shared, "e-gw2") == lbservice.Fronted(ip=IPv4Address("203.0.113.7"), port=45002)
    assert lbservice.fronted(shared, "e-gw3") == (
        "Service magw-gateways: has 2 ports and none named 'magw-e-gw3'"
    )
    assert lbservice.port_name("a-very-long-node-name") == "magw-a-very-lon"


def test_a_hostname_is_used_once_resolved() -> None:
    aws = service("lb", [UDP], [{"hostname": "abc.elb.example"}])
    assert lbservice.ingress(aws) == ("hostname", "abc.elb.example")
    assert lbservice.fronted(aws, "e-gw1", IPv4Address("198.51.100.9")) == lbservice.Fronted(
        ip=IPv4Address("198.51.100.9"), port=45001
    )
    assert lbservice.fronted(aws, "e-gw1") == (
        "Service lb: load balancer hostname 'abc.elb.example' does not resolve to an IPv4 address"
    )


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (service("lb", [UDP]), "Service lb: has no load balancer address yet (status.loadBalancer.ingress is empty)"),
        (service("lb", [UDP], []), "Service lb: has no load balancer address yet"),
        (service("lb", [UDP], [{"ip": "2001:db8::1"}]), "Service lb: load balancer ip '2001:db8::1' is not an IPv4"),
        (service("lb", [UDP], [{"ip": "1.2.3.4"}], type_="ClusterIP"), "Service lb: type is 'ClusterIP', not"),
        (service("lb", [{**UDP, "protocol": "TCP"}], [{"ip": "1.2.3.4"}]), "Service lb: port 'cable' is not UDP"),
        (service("lb", [], [{"ip": "1.2.3.4"}]), "Service lb: has 0 ports and none named 'magw-e-gw1'"),
    ],
)
def test_a_service_that_cannot_be_used_says_why(obj: dict[str, Any], reason: str) -> None:
    got = lbservice.fronted(obj, "e-gw1")
    assert isinstance(got, str) and got.startswith(reason)


async def _endpoint(env: KubeEnv, name: str) -> dict[str, Any] | None:
    with contextlib.suppress(Exception):
        obj: dict[str, Any] = await CustomObjectsApi(env.client).get_namespaced_custom_object(
            "submariner.io", "v1", ko.NS, "endpoints", name
        )
        return obj
    return None


async def test_the_gateway_publishes_the_services_address_and_port_once_it_has_them(kube_env: KubeEnv) -> None:
    """No address yet: nothing published (the gateway waits). The cloud writes the address: the Endpoint carries
    it and the Service's port. The address changes: the Endpoint follows (read every 5 s)."""
    objects = [o for o in ko.east() if o["kind"] != "Endpoint"]
    kube_env.emulator.load([*objects, service("magw-gw-e-gw1", [UDP])])
    args = ("--node", "e-gw1", "--cluster", "east", "--lease-duration", "2", "--public-service", "magw-gw-e-gw1")
    async with daemon(kube_env, "magw.daemons.gateway.main", *args):
        await until(lambda: _lease(kube_env), what="the gateway's lease")
        await asyncio.sleep(1.0)  # ten turns of its loop, lease held
        assert await _endpoint(kube_env, "east-e-gw1") is None  # waiting for the load balancer's address
        core = CoreV1Api(kube_env.client)
        body = {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}
        await core.patch_namespaced_service_status("magw-gw-e-gw1", ko.NS, body)

        async def published(ip: str) -> bool:
            ep = await _endpoint(kube_env, "east-e-gw1")
            return ep is not None and ep["spec"].get("public_ip") == ip

        await until(lambda: published("203.0.113.7"), what="the Endpoint with the Service's address", timeout=15)
        ep = await _endpoint(kube_env, "east-e-gw1")
        assert ep is not None and ep["spec"]["backend_config"]["publicPort"] == "45001"
        body = {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.8"}]}}}
        await core.patch_namespaced_service_status("magw-gw-e-gw1", ko.NS, body)
        await until(lambda: published("203.0.113.8"), what="the Endpoint following the new address", timeout=15)


async def _lease(env: KubeEnv) -> bool:
    with contextlib.suppress(Exception):
        lease = await CoordinationV1Api(env.client).read_namespaced_lease("magw-gateway-e-gw1", ko.NS)
        return bool(lease.spec.holder_identity)
    return False


def test_the_flag_needs_the_kube_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--source", "file", "--broker-dir", str(tmp_path), "--node", "e-gw1", "--cluster", "east",
            "--public-service", "magw-gw-e-gw1"]  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        gateway_main.main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("--public-service: only with --source kube")
