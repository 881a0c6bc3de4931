"""The egress gateway's additions to the netlink vocabulary behave the same on the fake and the kernel.

A VXLAN-GPE ``external`` link without MAC, ``encap ip`` device routes, ``fwmark/mask`` rules: create, read
back equal, replace a field, delete. On the kernel, ``ip -json`` reads them back independently.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Address

import attrs
import pytest

from magw.desired.state import DesiredState, Route, RouteEncap, Rule
from magw.drivers.netlink.driver import NetlinkDriver
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.reconcile.diff import diff
from magw.reconcile.driver import Driver
from tests.support.egress_world import node_plan
from tests.support.netns import can_use_netns, ip_json, netns


def _planned() -> DesiredState:
    return attrs.evolve(node_plan("n2").state, nft=None)


@pytest.fixture(params=["fake", pytest.param("kernel", marks=pytest.mark.kernel)])
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[Driver, str | None]]:
    if request.param == "fake":
        yield FakeNetlink(), None
        return
    if not can_use_netns():
        pytest.skip("needs root and network namespaces")
    with netns("mgev") as ns, NetlinkDriver(ns) as driver:
        yield driver, ns


def _sync(driver: Driver, desired: DesiredState) -> None:
    result = driver.apply(diff(desired, driver.observe()))
    assert [f.describe() for f in result.failed] == []
    assert driver.observe() == desired


def test_create_read_back_replace_delete(backend: tuple[Driver, str | None]) -> None:
    driver, ns = backend
    desired = _planned()
    _sync(driver, desired)
    if ns is not None:
        (link,) = ip_json(ns, "-d", "link", "show", "magw-egress")
        assert link["linkinfo"]["info_data"].get("external") and link["linkinfo"]["info_data"].get("gpe")
        rules = {r["priority"]: r for r in ip_json(ns, "rule", "show")}
        assert rules[12100]["fwmark"] == "0x1064" and rules[12100]["fwmask"] == "0x30ff"
        (route,) = ip_json(ns, "route", "show", "table", "12100")
        # iproute2 6.1's JSON writes the encap's dst over the route's "dst" key: look for the VIP anywhere.
        assert route["encap"] == "ip" and route["id"] == 100 and "192.168.77.100" in str(route)
    moved = tuple(
        attrs.evolve(r, encap=RouteEncap(id=100, dst=IPv4Address("192.168.77.150"))) if r.table == 12100 else r
        for r in desired.routes
    )
    remarked = tuple(attrs.evolve(r, fwmask=0x10FF) if r.priority == 12101 else r for r in desired.rules)
    _sync(driver, attrs.evolve(desired, routes=moved, rules=remarked))
    if ns is not None:
        assert "192.168.77.150" in str(ip_json(ns, "route", "show", "table", "12100"))
    _sync(driver, DesiredState())


def test_a_rule_without_fwmark_at_our_priority_is_replaced(backend: tuple[Driver, str | None]) -> None:
    driver, _ = backend
    desired = _planned()
    plain = tuple(Rule(priority=r.priority, table=r.table) for r in desired.rules)
    _sync(driver, attrs.evolve(desired, rules=plain))
    _sync(driver, desired)


def test_route_without_encap_is_replaced_by_one_with(backend: tuple[Driver, str | None]) -> None:
    driver, _ = backend
    desired = _planned()
    bare = tuple(Route(table=r.table, dst=r.dst, metric=r.metric, nexthops=r.nexthops) for r in desired.routes)
    _sync(driver, attrs.evolve(desired, routes=bare))
    _sync(driver, desired)
