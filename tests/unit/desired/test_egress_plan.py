"""The egress datapath planner (pure): bound vs unbound, shared vs exclusive, exclusions, candidates, determinism.

The world is tests/support/egress_world.py's (the one the kernel tests run). The golden file
``tests/golden/egress-<node>.txt`` is the reviewed rendering; regenerate with ``MAGW_REGEN_GOLDEN=1``.
"""

from __future__ import annotations

import difflib
import json
import os
import random
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import attrs
import pytest

from magw.desired.egressgw.bindings import resolve
from magw.desired.egressgw.plan import EgressGatewayInputs, plan_egressgw
from magw.desired.nft.values import NftTable
from magw.desired.render import render_json, render_text
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.model.egressgw import EgressBinding, EgressGateway
from magw.model.globalnet import Service, ServicePort
from magw.reconcile.diff import diff
from tests.support.egress_world import NODES, POD_CIDR, PODS, REMOTE_CIDR, SERVICE_CIDR, VIP_A, VIP_B, egress_model
from tests.support.paths import GOLDEN


def _inputs(node: str, *, shuffle: int | None = None, **changes: Any) -> EgressGatewayInputs:
    egress, services, pods = egress_model()
    node_ips = [IPv4Address(ip) for ip in NODES.values()]
    if shuffle is not None:  # the same input in another order
        rng = random.Random(shuffle)
        services, pods = tuple(rng.sample(services, len(services))), tuple(rng.sample(pods, len(pods)))
        rng.shuffle(node_ips)
        egress = EgressGateway(vips=rng.sample(egress.vips, len(egress.vips)))
    inputs = EgressGatewayInputs(
        node=node,
        cluster_cidrs=(POD_CIDR, SERVICE_CIDR),
        remote_cidrs=(REMOTE_CIDR,),
        node_ips=tuple(node_ips),
        egressgw=egress,
        resolution=resolve(egress, services, pods),
        services=services,
        pods=pods,
    )
    return attrs.evolve(inputs, **changes)


def _table(node: str, **changes: Any) -> NftTable:
    table = plan_egressgw(_inputs(node, **changes)).state.nft
    assert table is not None
    return table


def _set(table: NftTable, name: str) -> set[str]:
    return {e for s in table.sets if s.name == name for e in s.elements}


def _ip(pod: str) -> str:
    return PODS[pod][1]


@pytest.mark.parametrize("node", list(NODES))
def test_golden(node: str) -> None:
    text = render_text(plan_egressgw(_inputs(node)).state)
    path = GOLDEN / f"egress-{node}.txt"
    if os.environ.get("MAGW_REGEN_GOLDEN"):
        path.write_text(text)
    expected = path.read_text()
    assert text == expected, "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True)))


@pytest.mark.parametrize("seed", range(5))
def test_same_input_in_any_order_gives_the_same_bytes(seed: int) -> None:
    for node in NODES:
        a, b = plan_egressgw(_inputs(node)), plan_egressgw(_inputs(node, shuffle=seed))
        assert render_text(a.state) == render_text(b.state)
        assert json.dumps(render_json(a.state), sort_keys=True) == json.dumps(render_json(b.state), sort_keys=True)


def test_shared_and_exclusive_bindings_pick_the_pods() -> None:
    table = _table("n2")
    assert _set(table, "pods_100") == {_ip("pa"), _ip("pl")}  # namespace shop, shared
    assert _set(table, "pods_101") == {_ip("pb")}  # web/api only
    assert _set(table, "bound") == {_ip("pa"), _ip("pl"), _ip("pb")}


def test_an_unbound_pod_appears_nowhere() -> None:
    for node in NODES:
        text = render_text(plan_egressgw(_inputs(node)).state)
        assert _ip("pu") not in text


def test_another_service_of_an_exclusive_namespace_is_not_bound() -> None:
    egress, services, pods = egress_model()
    other = Service(namespace="web", name="admin", selector={"app": "api"}, ports=(ServicePort(port=81),))
    services = (*services, other)
    inputs = _inputs("n1", services=services, resolution=resolve(egress, services, pods))
    table = plan_egressgw(inputs).state.nft
    assert table is not None
    assert not any('"dport"}, "right": 81' in r.expr for r in table.rules)


def test_cluster_remote_node_link_local_and_multicast_are_excluded_but_not_vips() -> None:
    excluded = _set(_table("n2"), "excluded")
    assert excluded == {
        str(POD_CIDR),
        str(SERVICE_CIDR),
        str(REMOTE_CIDR),
        *NODES.values(),
        "169.254.0.0/16",
        "224.0.0.0/3",
    }
    assert not any(IPv4Address(v) in IPv4Network(e) for e in excluded for v in (VIP_A, VIP_B))


def test_only_candidates_carry_dnat_and_snat() -> None:
    for node, candidate in (("n1", True), ("n2", False), ("n3", True)):
        chains = {c.name for c in _table(node).chains}
        assert ("postrouting" in chains) is candidate
        assert ("prerouting-nat" in chains) is candidate
        assert {"prerouting-raw", "forward"} <= chains


def test_steering_objects_are_the_same_on_every_node() -> None:
    states = [plan_egressgw(_inputs(n)).state for n in NODES]
    assert len({(s.links, s.addresses, s.routes, s.rules) for s in states}) == 1
    lines = render_text(states[0]).splitlines()
    assert f"route 0.0.0.0/0 table 12100 via 0.0.0.0 dev magw-egress encap ip id 100 dst {VIP_A} metric 0" in lines
    assert "rule 12101: from all fwmark 0x1065/0x30ff lookup 12101" in lines


def test_no_vip_plans_nothing() -> None:
    plan = plan_egressgw(_inputs("n1", egressgw=EgressGateway()))
    assert render_text(plan.state) == render_text(plan_egressgw(_inputs("n1", egressgw=EgressGateway())).state)
    assert not plan.state.links and plan.state.nft is None


def test_a_port_claimed_twice_on_one_vip_is_reported() -> None:
    egress, services, pods = egress_model()
    egress = EgressGateway(vips=[attrs.evolve(egress.vips[0], bindings=(EgressBinding("shop"), EgressBinding("web")))])
    more = Service(namespace="web", name="zz", selector={"app": "api"}, ports=(ServicePort(port=80),))
    services = (*services, more)
    plan = plan_egressgw(_inputs("n1", egressgw=egress, services=services, resolution=resolve(egress, services, pods)))
    assert any("80/tcp of web/zz is already" in p for p in plan.problems)


def test_the_fake_kernel_accepts_the_plan() -> None:
    for node in NODES:
        state = plan_egressgw(_inputs(node)).state
        fake = FakeNetlink()
        result = fake.apply(diff(attrs.evolve(state, nft=None), fake.observe()))
        assert [f.describe() for f in result.failed] == []
        assert diff(attrs.evolve(state, nft=None), fake.observe()).ops == ()
