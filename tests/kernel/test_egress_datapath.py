"""The egress gateway's datapath (docs/egress-datapath.md) on the real kernel, nodes programmed by our drivers
from plan_egressgw.

tests/support/egress_world.py builds the cluster. Each check asks a real server which source address it saw.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.egress_world import (
    BACKEND_PORT,
    NODES,
    OUTSIDE,
    OUTSIDE_PORT,
    PODS,
    SERVICE_PORT,
    VIP_A,
    VIP_B,
    World,
    echo_server,
    egress_world,
    seen_by_server,
)
from tests.support.netns import can_use_netns

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces"),
]

PROTOS = ["tcp", "udp"]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with egress_world() as w:
        yield w


@pytest.fixture(scope="module")
def outside(world: World) -> Iterator[None]:
    with (
        echo_server(world.ns("out"), "tcp", OUTSIDE, OUTSIDE_PORT),
        echo_server(world.ns("out"), "udp", OUTSIDE, OUTSIDE_PORT),
    ):
        yield


@pytest.fixture(scope="module")
def backend(world: World) -> Iterator[None]:
    ip = PODS["pb"][1]
    with echo_server(world.ns("pb"), "tcp", ip, BACKEND_PORT), echo_server(world.ns("pb"), "udp", ip, BACKEND_PORT):
        yield


def test_a_second_sync_changes_nothing(world: World) -> None:
    for node in NODES:
        assert world.sync(node) == []


@pytest.mark.parametrize("proto", PROTOS)
def test_bound_pods_leave_as_their_vip_unbound_as_their_node(world: World, outside: None, proto: str) -> None:
    seen = {pod: seen_by_server(world.ns(pod), proto, OUTSIDE, OUTSIDE_PORT) for pod in PODS}
    assert seen == {
        "pa": {VIP_A},  # steered from n2 to the holder n1
        "pl": {VIP_A},  # on the holder itself: through lo and back, SNATed on the second pass
        "pb": {VIP_B},  # the exclusive binding, from the other candidate n3
        "pu": {NODES["n2"]},  # unbound: the CNI's masquerade, untouched
    }


@pytest.mark.parametrize("proto", PROTOS)
def test_cluster_internal_traffic_is_not_steered(world: World, backend: None, proto: str) -> None:
    before = world.rx("n1")
    assert seen_by_server(world.ns("pa"), proto, PODS["pb"][1], BACKEND_PORT) == {PODS["pa"][1]}
    assert world.rx("n1") == before


@pytest.mark.parametrize("proto", PROTOS)
def test_ingress_keeps_the_client_address(world: World, backend: None, proto: str) -> None:
    assert seen_by_server(world.ns("out"), proto, VIP_B, SERVICE_PORT) == {OUTSIDE}


@pytest.mark.parametrize("proto", PROTOS)
@pytest.mark.parametrize("pod", ["pa", "pl"])
def test_hairpin_is_seen_as_the_source_pods_vip(world: World, backend: None, proto: str, pod: str) -> None:
    assert seen_by_server(world.ns(pod), proto, VIP_B, SERVICE_PORT) == {VIP_A}


@pytest.mark.parametrize("proto", PROTOS)
def test_an_unbound_pod_reaches_a_vip_and_gets_replies(world: World, backend: None, proto: str) -> None:
    assert seen_by_server(world.ns("pu"), proto, VIP_B, SERVICE_PORT) == {VIP_B}
