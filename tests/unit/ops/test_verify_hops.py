"""The hop where a traced flow died (magw.ops.verify.hops), from who saw its request and its reply."""

from __future__ import annotations

from magw.ops.verify import hops

ROUTE = hops.route(
    client="east-w1-p1",
    client_node="east-w1",
    local_gateways=["east-gw1", "east-gw2"],
    remote_gateways=["west-gw1", "west-gw2"],
    server_nodes=["west-w1"],
    servers=["west-w1-p1"],
    local="east",
    remote="west",
)
THERE = {"east-w1", "east-gw2", "west-gw1", "west-w1", "west-w1-p1"}
BACK = {"west-w1", "west-gw2", "east-gw1", "east-w1", "east-w1-p1"}


def test_a_flow_seen_everywhere_has_no_break() -> None:
    assert hops.find_break(ROUTE, THERE, BACK) is None


def test_dropped_on_the_local_gateway_names_it_and_the_wan() -> None:
    b = hops.find_break(ROUTE, {"east-w1", "east-gw2"}, set())
    assert b is not None
    assert b.direction == "request"
    assert b.last == ("east-gw2",)
    assert b.text() == "request died at east-gw2 -> a west gateway (west-gw1|west-gw2)"


def test_never_left_the_client_node() -> None:
    b = hops.find_break(ROUTE, {"east-w1"}, set())
    assert b is not None and b.hop == "east-w1 -> a east gateway (east-gw1|east-gw2)"


def test_never_reached_its_own_node() -> None:
    b = hops.find_break(ROUTE, set(), set())
    assert b is not None and b.hop == "east-w1-p1 -> east-w1"


def test_reached_the_server_node_but_not_the_pod() -> None:
    b = hops.find_break(ROUTE, THERE - {"west-w1-p1"}, set())
    assert b is not None and (b.direction, b.hop) == ("request", "west-w1 -> west-w1-p1")


def test_the_reply_lost_between_the_gateways() -> None:
    b = hops.find_break(ROUTE, THERE, {"west-w1", "west-gw2"})
    assert b is not None
    assert (b.direction, b.hop) == ("reply", "west-gw2 -> a east gateway (east-gw1|east-gw2)")


def test_the_reply_reached_the_node_but_not_the_client_pod() -> None:
    b = hops.find_break(ROUTE, THERE, BACK - {"east-w1-p1"})
    assert b is not None and b.hop == "east-w1 -> east-w1-p1"


def test_a_client_on_a_gateway_needs_no_other_local_gateway() -> None:
    r = hops.route(
        client="east-gw1-p1",
        client_node="east-gw1",
        local_gateways=["east-gw1", "east-gw2"],
        remote_gateways=["west-gw1"],
        server_nodes=["west-gw1"],
        servers=["west-gw1-p1"],
        local="east",
        remote="west",
    )
    assert hops.find_break(r, {"east-gw1", "west-gw1", "west-gw1-p1"}, {"west-gw1", "east-gw1", "east-gw1-p1"}) is None


def test_seen_by_splits_requests_and_replies_per_port() -> None:
    trace = {"east-gw1": ({21000, 21001}, {21001}), "west-gw1": ({21000}, set())}
    assert hops.seen_by(trace, 21000) == ({"east-gw1", "west-gw1"}, set())
    assert hops.seen_by(trace, 21001) == ({"east-gw1"}, {"east-gw1"})
    assert hops.seen_by(trace, 21002) == (set(), set())


def test_elements_of_an_nft_listing() -> None:
    listing = {
        "nftables": [
            {"metainfo": {"json_schema_version": 1}},
            {"set": {"name": "req", "elem": [21000, {"elem": {"val": 21003, "expires": 119}}]}},
        ]
    }
    assert hops.elements(listing) == {21000, 21003}
    assert hops.elements({"nftables": [{"set": {"name": "req"}}]}) == set()


def test_the_table_keeps_to_its_port_range_below_the_ephemeral_ports() -> None:
    text = hops.table_text()
    assert "udp sport 21000-29999 update @req { udp sport }" in text
    assert "udp dport 21000-29999 update @rep { udp dport }" in text
    assert hops.PORT_HI < 32768
