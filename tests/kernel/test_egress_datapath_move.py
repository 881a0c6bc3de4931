"""The VIP moves (addr del/add + one GARP, as keepalived does): traffic follows, no node is reprogrammed."""

from __future__ import annotations

import pytest

from tests.support.egress_world import NODES, OUTSIDE, OUTSIDE_PORT, VIP_A, echo_server, egress_world, seen_by_server
from tests.support.netns import can_use_netns

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces"),
]


@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_new_flows_follow_the_vip_to_the_new_holder(proto: str) -> None:
    with egress_world() as w, echo_server(w.ns("out"), proto, OUTSIDE, OUTSIDE_PORT):
        before = {n: w.rx(n) for n in ("n1", "n3")}
        assert seen_by_server(w.ns("pa"), proto, OUTSIDE, OUTSIDE_PORT) == {VIP_A}  # warms n2's ARP entry
        assert w.rx("n1") > before["n1"] and w.rx("n3") == before["n3"]

        w.move_vip(VIP_A, old="n1", new="n3")
        assert [w.sync(n) for n in NODES] == [[], [], []]  # nothing to reprogram anywhere
        middle = {n: w.rx(n) for n in ("n1", "n3")}
        for pod in ("pa", "pl"):  # pl lives on the old holder: it now tunnels to n3 like everybody else
            assert seen_by_server(w.ns(pod), proto, OUTSIDE, OUTSIDE_PORT) == {VIP_A}
        assert w.rx("n3") - middle["n3"] >= 6  # 3 flows of each pod, decapsulated on the new holder
        assert w.rx("n1") == middle["n1"]
