"""The seed's binding rules, resolved: shared namespace VIPs, exclusive Service VIPs, conflicts reported."""

from __future__ import annotations

from ipaddress import IPv4Address

from magw.desired.egressgw.bindings import resolve
from magw.model.egressgw import EgressBinding, EgressGateway, EgressVIP
from magw.model.globalnet import Pod, PodPhase, Service


def _vip(name: str, last: int, *bindings: EgressBinding) -> EgressVIP:
    return EgressVIP(
        name=name, vip=IPv4Address(f"192.0.2.{last}"), vrid=last, candidates=("n1", "n2"), bindings=bindings
    )


def _pod(ns: str, name: str, ip: str, app: str, **kw: object) -> Pod:
    return Pod(namespace=ns, name=name, ip=IPv4Address(ip), labels={"app": app}, **kw)  # type: ignore[arg-type]


SERVICES = (
    Service(namespace="shop", name="web", selector={"app": "web"}),
    Service(namespace="shop", name="db", selector={"app": "db"}),
    Service(namespace="blog", name="api", selector={"app": "api"}),
)
PODS = (
    _pod("shop", "web-1", "10.1.0.10", "web"),
    _pod("shop", "db-1", "10.1.0.20", "db"),
    _pod("shop", "db-2", "10.1.0.21", "db", phase=PodPhase.PENDING),
    _pod("shop", "db-3", "10.1.0.22", "db", host_network=True),
    _pod("blog", "api-1", "10.1.1.10", "api"),
    _pod("blog", "web-9", "10.1.1.11", "web"),
)


def test_a_shared_vip_covers_every_service_of_its_namespace_and_no_other() -> None:
    r = resolve(EgressGateway(vips=[_vip("a", 10, EgressBinding("shop"))]), SERVICES, PODS)
    assert r.of("a").services == ("shop/db", "shop/web")
    # Pending and host-network pods do not leave through the VIP; blog's pods are not bound.
    assert r.of("a").pods == (IPv4Address("10.1.0.10"), IPv4Address("10.1.0.20"))
    assert r.conflicts == ()


def test_an_exclusive_vip_wins_over_its_namespace_shared_vip() -> None:
    vips = [_vip("a", 10, EgressBinding("shop")), _vip("b", 11, EgressBinding("shop", "web"))]
    r = resolve(EgressGateway(vips=vips), SERVICES, PODS)
    assert r.of("a").services == ("shop/db",)
    assert r.of("b").services == ("shop/web",)
    assert r.of("b").pods == (IPv4Address("10.1.0.10"),)


def test_an_unbound_vip_has_no_users_and_an_unknown_name_is_empty() -> None:
    r = resolve(EgressGateway(vips=[_vip("idle", 12)]), SERVICES, PODS)
    assert r.of("idle").services == () and r.of("idle").pods == ()
    assert r.of("nope").pods == ()


def test_a_namespace_bound_twice_is_reported_and_the_first_vip_by_name_is_used() -> None:
    vips = [_vip("z", 10, EgressBinding("shop")), _vip("m", 11, EgressBinding("shop"))]
    r = resolve(EgressGateway(vips=vips), SERVICES, PODS)
    assert r.of("m").services == ("shop/db", "shop/web") and r.of("z").services == ()
    assert r.conflicts == ("namespace shop is bound to VIPs m and z; m is used",)


def test_a_pod_behind_two_services_of_different_vips_is_reported() -> None:
    services = (*SERVICES, Service(namespace="shop", name="all", selector={}))  # selects every pod of shop
    vips = [_vip("a", 10, EgressBinding("shop", "all")), _vip("b", 11, EgressBinding("shop", "web"))]
    r = resolve(EgressGateway(vips=vips), services, PODS)
    assert IPv4Address("10.1.0.10") in r.of("a").pods and IPv4Address("10.1.0.10") not in r.of("b").pods
    assert r.conflicts == ("pod 10.1.0.10 is behind Services of VIPs a and b; a is used",)


def test_a_service_without_selector_uses_its_endpoint_addresses() -> None:
    svc = Service(namespace="ext", name="legacy", endpoint_addresses=[IPv4Address("10.1.2.5")])
    r = resolve(EgressGateway(vips=[_vip("a", 10, EgressBinding("ext", "legacy"))]), (svc,), PODS)
    assert r.of("a").pods == (IPv4Address("10.1.2.5"),)
