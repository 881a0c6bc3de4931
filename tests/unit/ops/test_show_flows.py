"""Per-path flows: the tracked connections toward remote clusters, each asked of the kernel with ``ip route get``
(its own hash inputs), counted per gateway address."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from magw.ops.show.connections import connection_rows
from magw.ops.show.flows import Flow, count_paths, parse_conntrack, route_get_lines
from magw.ops.show.inputs import Inputs, NodeKernel
from tests.unit.ops.show_fixtures import GW_STATUS

CONNTRACK = """\
udp      17 29 src=10.1.3.2 dst=10.2.3.2 sport=40000 dport=7 src=10.2.3.2 dst=10.1.3.2 sport=7 dport=40000 mark=0 use=1
tcp      6 431999 ESTABLISHED src=10.1.1.2 dst=100.2.0.10 sport=5555 dport=80 src=10.2.2.2 dst=10.1.1.2 sport=8080 \
dport=5555 [ASSURED] mark=0 use=1
icmp     1 29 src=240.17.0.101 dst=240.17.0.11 type=8 code=0 id=53730 src=240.17.0.11 dst=240.17.0.101 type=0 code=0 \
id=53730 mark=0 use=1
unknown  2 580 src=10.1.1.2 dst=224.0.0.1 [UNREPLIED] src=224.0.0.1 dst=10.1.1.2 mark=0 use=1
conntrack v1.4.7 (conntrack-tools): 4 flow entries have been shown.
"""


def test_conntrack_original_tuples() -> None:
    """The first tuple of each line is the original direction; the reply's repeated keys are not mixed in."""
    assert parse_conntrack(CONNTRACK) == [
        Flow("udp", IPv4Address("10.1.3.2"), IPv4Address("10.2.3.2"), 40000, 7),
        Flow("tcp", IPv4Address("10.1.1.2"), IPv4Address("100.2.0.10"), 5555, 80),
        Flow("icmp", IPv4Address("240.17.0.101"), IPv4Address("240.17.0.11")),
    ]


def test_only_flows_toward_remote_clusters_are_asked_with_their_input_device() -> None:
    lines = route_get_lines(
        parse_conntrack(CONNTRACK),
        remote=[IPv4Network("10.2.0.0/16"), IPv4Network("100.2.0.0/16")],
        own_pods=IPv4Network("10.1.1.0/24"),
        pod_dev="cni0",
    )
    assert lines == [
        "route get 10.2.3.2 from 10.1.3.2 iif vx-submariner ipproto udp sport 40000 dport 7",
        "route get 100.2.0.10 from 10.1.1.2 iif cni0 ipproto tcp sport 5555 dport 80",
    ]
    assert len(route_get_lines(parse_conntrack(CONNTRACK), remote=[IPv4Network("0.0.0.0/0")], own_pods=None,
                               pod_dev="cni0", limit=2)) == 2  # fmt: skip


def test_batch_answers_counted_per_gateway() -> None:
    out = (
        '[{"dst":"10.2.3.2","from":"10.1.3.2","gateway":"241.19.0.4","dev":"vxlan-tunnel","table":"100"}]\n'
        '[{"dst":"10.2.3.3","from":"10.1.3.2","gateway":"241.19.0.9","dev":"vxlan-tunnel","table":"100"}]\n'
        '[{"dst":"10.2.3.4","from":"10.1.3.2","gateway":"241.19.0.4","dev":"vxlan-tunnel","table":"100"}]\n'
        '[{"dst":"10.2.3.5","from":"10.1.3.2","dev":"eth0","table":"main"}]\n'
    )
    assert count_paths(out) == {"241.19.0.4": 2, "241.19.0.9": 1}


def test_rows_carry_the_counts_only_when_flows_were_read() -> None:
    read = NodeKernel(tracked=3, path_flows={"241.19.0.4": 3})
    rows = connection_rows(Inputs(source="t", statuses={"east-gw1": GW_STATUS}, kernels={"east-gw1": read}))
    assert [(r["remote"], r["flows"]) for r in rows] == [("west-gw1", 3), ("west-gw2", 0)]
    unread = NodeKernel()
    rows = connection_rows(Inputs(source="t", statuses={"east-gw1": GW_STATUS}, kernels={"east-gw1": unread}))
    assert [r["flows"] for r in rows] == [None, None]
