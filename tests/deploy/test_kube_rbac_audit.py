"""Every request each daemon really sends is allowed by its role in deploy/rbac: the roles are sufficient
(tests/deploy/test_deploy_rbac.py pins that they are least privilege). Each daemon runs alone against an emulator
that this test fills and inspects without HTTP, so the emulator's request log holds that daemon's requests
only."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from magw.kubeemu import Emulator
from tests.support import kube_objects as ko
from tests.support.kube_daemons import daemon
from tests.support.kubeemu_fixtures import BROKER_NAMESPACE, KubeEnv, running_emulator, until
from tests.support.rbac_audit import allowed, request_of, rules_of

NS = ko.NS


def _requests(emulator: Emulator) -> list[Any]:
    return [r for r in (request_of(m, p) for m, p in emulator.faults.log) if r is not None]


def _check(emulator: Emulator, service_account: str, *, least: set[str]) -> None:
    requests = _requests(emulator)
    rules = rules_of(service_account, NS)
    denied = sorted({str(r) for r in requests if not allowed(rules, r)})
    assert denied == [], f"{service_account} sent requests its role does not allow: {denied}"
    verbs = {f"{r.verb} {r.resource}" for r in requests}
    assert least <= verbs, f"the audit saw too little: {sorted(least - verbs)} missing from {sorted(verbs)}"


def _objects(env: KubeEnv, group: str, version: str, plural: str) -> dict[Any, Any]:
    return env.emulator.store.objects(env.emulator.store.registry.find(group, version, plural))


def test_the_audit_denies_what_a_role_lacks() -> None:
    patch_node = request_of("PATCH", "/api/v1/nodes/e-w1")
    status = request_of("PATCH", f"/apis/submariner.io/v1/namespaces/{NS}/gateways/e-gw1/status")
    watch = request_of("GET", "/api/v1/pods?watch=True&resourceVersion=5")
    assert patch_node is not None and status is not None and watch is not None
    assert watch.verb == "watch" and status.resource == "gateways/status"
    assert allowed(rules_of("magw-route-agent", NS), patch_node)
    assert not allowed(rules_of("magw-globalnet", NS), patch_node)
    assert allowed(rules_of("magw-gateway", NS), status) and not allowed(rules_of("magw-route-agent", NS), status)
    other_ns = request_of("DELETE", "/apis/submariner.io/v1/namespaces/default/endpoints/x")
    assert other_ns is not None and not allowed(rules_of("magw-gateway", NS), other_ns)  # a Role stays home


async def test_the_route_agents_requests_are_allowed() -> None:
    async with running_emulator() as env:
        objects = ko.east()
        objects[6] = ko.node("e-w1", "172.18.0.3", None)
        env.emulator.load(objects)
        args = ("--node", "e-w1", "--cluster", "east", "--fake", "--cni-interface", "lo")
        async with daemon(env, "magw.daemons.route_agent.main", *args):
            await until(
                lambda: _objects(env, "", "v1", "nodes")[("", "e-w1")]["metadata"].get("annotations"),
                what="the annotation",
            )
        _check(env.emulator, "magw-route-agent", least={"list nodes", "watch nodes", "patch nodes", "list pods"})


async def test_the_gateways_requests_are_allowed_here_and_at_the_broker() -> None:
    async with running_emulator() as env, running_emulator(BROKER_NAMESPACE, name="broker") as broker:
        lb = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "magw-gw-e-gw1", "namespace": NS},
              "spec": {"type": "LoadBalancer", "ports": [{"protocol": "UDP", "port": 45001}]},
              "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}  # fmt: skip
        env.emulator.load(
            [o for o in ko.east() if o["kind"] != "Endpoint"] + [ko.endpoint("east", "e-gw2", "172.18.0.8"), lb]
        )
        broker.emulator.load([ko.endpoint("west", "w-gw1", "172.19.0.4", ns=BROKER_NAMESPACE)])
        args = ("--node", "e-gw1", "--cluster", "east", "--lease-duration", "2", "--tidy-grace", "0.5")
        args += ("--broker-kubeconfig", str(broker.kubeconfig), "--broker-namespace", BROKER_NAMESPACE)
        args += ("--public-service", "magw-gw-e-gw1")
        async with daemon(env, "magw.daemons.gateway.main", *args) as proc:
            local = _objects(env, "submariner.io", "v1", "endpoints")
            await until(lambda: (NS, "east-e-gw1") in local and (NS, "west-w-gw1") in local, what="publish + sync")
            await until(lambda: (NS, "east-e-gw2") not in local, what="the tidy-up of e-gw2 (it has no lease)")
            gateways = _objects(env, "submariner.io", "v1", "gateways")
            await until(lambda: (gateways.get((NS, "e-gw1")) or {}).get("status"), what="the Gateway status")
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 10)
        least = {"create endpoints", "delete endpoints", "create leases", "patch gateways/status", "get leases",
                 "get services"}  # fmt: skip
        _check(env.emulator, "magw-gateway", least=least)
        broker_rules = rules_of("magw-broker-client", BROKER_NAMESPACE)
        denied = sorted({str(r) for r in _requests(broker.emulator) if not allowed(broker_rules, r)})
        assert denied == [], f"the broker client's role does not allow: {denied}"


async def test_the_globalnet_controllers_requests_are_allowed() -> None:
    async with running_emulator() as env:
        objects = ko.east()
        objects[2]["spec"]["global_cidr"] = ["242.1.0.0/24"]
        egress = {
            "apiVersion": "submariner.io/v1",
            "kind": "GlobalEgressIP",
            "metadata": {"name": "db", "namespace": "web"},
            "spec": {"numberOfIPs": 1},
        }
        env.emulator.load([*objects, egress])
        args = ("--cluster", "east", "--lease-duration", "2")
        async with daemon(env, "magw.daemons.globalnet.main", *args):
            items = _objects(env, "submariner.io", "v1", "globalegressips")
            await until(lambda: (items[("web", "db")].get("status") or {}).get("allocatedIPs"), what="allocation")
        least = {"patch globalegressips/status", "create clusterglobalegressips", "create leases"}
        _check(env.emulator, "magw-globalnet", least=least)
