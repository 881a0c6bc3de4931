"""benchmarks/soak_drops.py: the drop counters a violated soak row names, parsed from the kernel's and Open vSwitch's
own texts."""

from __future__ import annotations

from pathlib import Path

from benchmarks.soak_drops import KERNEL, moved, parse_coverage, parse_snmp

# /proc/net/snmp's layout (kernel 6.18), cut to three protocols; the values differ per column so a column mix-up shows
SNMP = """\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers \
OutRequests OutDiscards OutNoRoutes ReasmTimeout
Ip: 1 64 900 11 12 500 13 14 400 300 15 16 0
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs OutMsgs OutErrors OutDestUnreachs
Icmp: 7 0 0 7 9 0 21
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 100 31 32 90 33 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 99 99 0 99 0 0 0 0
"""

# ovs-appctl coverage/show (Open vSwitch 3.1): a header, counters with a total, and the ones never hit
COVERAGE = """\
Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash=5b3b2b8a:
drop_action_of_pipeline      0.0/sec     0.283/sec        0.0047/sec   total: 17
datapath_drop_userspace_action_error   0.0/sec     1.517/sec        0.0253/sec   total: 91
netlink_sent                 4.2/sec     3.950/sec        0.0658/sec   total: 237
120 events never hit
"""


def test_the_snmp_counters_come_from_their_own_columns() -> None:
    assert parse_snmp(SNMP) == {
        "Ip.InDiscards": 14, "Ip.OutNoRoutes": 16, "Ip.OutDiscards": 15, "Ip.InHdrErrors": 11, "Ip.InAddrErrors": 12,
        "Udp.NoPorts": 31, "Udp.InErrors": 32, "Udp.RcvbufErrors": 33, "Icmp.OutDestUnreachs": 21,
    }  # fmt: skip


def test_this_kernels_snmp_has_every_counter_the_soak_reads() -> None:
    got = parse_snmp(Path("/proc/net/snmp").read_text())
    assert set(got) == {f"{proto}.{name}" for proto, names in KERNEL.items() for name in names}


def test_only_the_drop_counters_of_the_coverage_are_kept() -> None:
    assert parse_coverage(COVERAGE) == {
        "ovs.drop_action_of_pipeline": 17,
        "ovs.datapath_drop_userspace_action_error": 91,
    }


def test_moved_names_what_grew_per_node_and_counts_a_new_counter_from_zero() -> None:
    before = {"east-gw2": {"Ip.OutNoRoutes": 5, "Udp.NoPorts": 2}, "east-gw1": {"Ip.OutNoRoutes": 1}, "west-gw1": {}}
    after = {
        "east-gw2": {"Ip.OutNoRoutes": 7, "Udp.NoPorts": 2, "ovs.drop_action_of_pipeline": 3},
        "east-gw1": {"Ip.OutNoRoutes": 1},
        "west-gw1": {"Ip.OutNoRoutes": 9},  # not read before: left out, not "+9"
    }
    assert moved(before, after, ["east-gw1", "east-gw2", "west-gw1"]) == [
        "east-gw2: Ip.OutNoRoutes +2, ovs.drop_action_of_pipeline +3"
    ]
    assert moved(before, after, ["east-gw1"]) == []
