"""The demo's spread table: every share is computed from the counts shown beside it, per column and per cluster
(two gateways that sent 410 and 230 datagrams have 64% and 36% of what their cluster sent, not 50% each)."""

from __future__ import annotations

from ipaddress import IPv4Address

from magw.lab.observe.spread import GatewayCount, SpreadResult, shares, spread_text
from magw.lab.spec.layout import PodLayout


def _pod(cluster: str, ip: str) -> PodLayout:
    return PodLayout(
        name=f"{cluster}-w1-p1", short="w1-p1", cluster=cluster, node=f"{cluster}-w1", namespace=f"t-{cluster}-w1-p1",
        host_if="p1", ip=IPv4Address(ip),
    )  # fmt: skip


def _gw(name: str, cluster: str, tx: int, rx: int) -> GatewayCount:
    return GatewayCount(gateway=name, cluster=cluster, tunnel_tx=tx, tunnel_rx=rx, intra_rx=0, intra_tx=0)


RESULT = SpreadResult(
    client=_pod("east", "10.1.1.10"),
    server=_pod("west", "10.2.1.10"),
    flows=64,
    proto="udp",
    sent=640,
    received=640,
    gateways=(
        _gw("east-gw1", "east", 410, 320),
        _gw("east-gw2", "east", 230, 320),
        _gw("west-gw1", "west", 500, 480),
        _gw("west-gw2", "west", 140, 160),
    ),
)


def test_shares_are_each_counts_part_of_the_sum() -> None:
    """410 and 230 of 640; an all-zero column is 0% each, not a division by zero."""
    assert [round(s, 4) for s in shares([410, 230])] == [0.6406, 0.3594]
    assert shares([0, 0]) == [0.0, 0.0]


def test_every_row_shows_the_share_of_each_count_within_its_cluster() -> None:
    """The row of a gateway that sent 410 of its cluster's 640 says 64% next to 410, and its rx share next to
    its rx count; the server cluster's rows likewise."""
    rows = {line.split()[0]: line.split()[1:] for line in spread_text(RESULT).splitlines()[2:-1]}
    assert rows == {
        "east-gw1": ["410", "64%", "320", "50%"],
        "east-gw2": ["230", "36%", "320", "50%"],
        "west-gw1": ["500", "78%", "480", "75%"],
        "west-gw2": ["140", "22%", "160", "25%"],
    }
