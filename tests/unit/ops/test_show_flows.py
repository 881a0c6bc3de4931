"""Per-path flows: the tracked connections toward remote clusters, each looked for in the connection tracking of
the next hop of each path, counted per gateway address."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from magw.ops.show.connections import connection_rows
from magw.ops.show.flows import count_paths, toward, tracked_tuples
from magw.ops.show.inputs import Inputs, NodeKernel
from magw.util.conntrack import Entry, Flow, parse_conntrack
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


def _flow(proto: str, src: str, dst: str, sport: int | None = None, dport: int | None = None) -> Flow:
    return Flow(proto, IPv4Address(src), IPv4Address(dst), sport, dport)


def test_conntrack_tuples() -> None:
    """Each line gives its original and its reply tuple; the keys after the reply (mark, use) are not mixed in,
    and a protocol without addresses we count (``unknown``) and the summary line are skipped."""
    assert parse_conntrack(CONNTRACK) == [
        Entry(_flow("udp", "10.1.3.2", "10.2.3.2", 40000, 7), _flow("udp", "10.2.3.2", "10.1.3.2", 7, 40000)),
        Entry(_flow("tcp", "10.1.1.2", "100.2.0.10", 5555, 80), _flow("tcp", "10.2.2.2", "10.1.1.2", 8080, 5555)),
        Entry(_flow("icmp", "240.17.0.101", "240.17.0.11"), _flow("icmp", "240.17.0.11", "240.17.0.101")),
    ]


def test_a_line_without_its_reply_tuple_is_skipped() -> None:
    assert parse_conntrack("udp      17 29 src=10.1.3.2 dst=10.2.3.2 sport=1 dport=7 mark=0 use=1\n") == []
    assert parse_conntrack("udp 17 29 src=10.1.3.2 dst=nonsense sport=1 dport=7 src=10.2.3.2 dst=10.1.3.2\n") == []


def test_leaving_is_the_tuple_after_the_nodes_own_nat() -> None:
    """Globalnet's SNAT on a gateway: the original source is the pod, the reply goes to the global IP; the packets
    leave with the global IP as their source, which is what the next hop tracks."""
    e = Entry(_flow("tcp", "10.1.1.2", "242.2.0.10", 5555, 80), _flow("tcp", "242.2.0.10", "242.1.0.7", 80, 61000))
    assert e.leaving == _flow("tcp", "242.1.0.7", "242.2.0.10", 61000, 80)


def test_only_flows_toward_remote_clusters_are_looked_for() -> None:
    mine = toward(parse_conntrack(CONNTRACK), [IPv4Network("10.2.0.0/16"), IPv4Network("100.2.0.0/16")])
    assert [e.original.dst for e in mine] == [IPv4Address("10.2.3.2"), IPv4Address("100.2.0.10")]
    assert len(toward(parse_conntrack(CONNTRACK), [IPv4Network("0.0.0.0/0")], limit=2)) == 2


def test_a_flow_counts_on_the_path_whose_next_hop_tracks_it_in_either_direction() -> None:
    """gw-a tracks the first flow as it was sent; gw-b tracks the second only as a reply (its request came the
    other way): both count. A flow no next hop tracks counts nowhere."""
    one, two, lost = (_flow("udp", "10.1.3.2", "10.2.3.2", p, 7) for p in (40000, 40001, 40002))
    hops = {
        "240.17.0.11": tracked_tuples([Entry(one, one.reversed())]),
        "240.17.0.12": tracked_tuples([Entry(two.reversed(), two)]),
    }
    assert count_paths([one, two, lost], hops) == {"240.17.0.11": 1, "240.17.0.12": 1}
    assert count_paths([lost], hops) == {}


def test_rows_carry_the_counts_only_when_flows_were_read() -> None:
    read = NodeKernel(tracked=3, path_flows={"241.19.0.4": 3})
    rows = connection_rows(Inputs(source="t", statuses={"east-gw1": GW_STATUS}, kernels={"east-gw1": read}))
    assert [(r["remote"], r["flows"]) for r in rows] == [("west-gw1", 3), ("west-gw2", 0)]
    unread = NodeKernel()
    rows = connection_rows(Inputs(source="t", statuses={"east-gw1": GW_STATUS}, kernels={"east-gw1": unread}))
    assert [r["flows"] for r in rows] == [None, None]
