"""magw.lab.observe.ctsync.count_established: which lines of a ``conntrackd -e`` listing count as a synced connection.

The listing below is the raw output of a backup's external cache in the egress lab (docs/egress-ha.md shows the
format): only ESTABLISHED TCP flows whose original destination is one of the targets count.
"""

from __future__ import annotations

from magw.lab.observe.ctsync import count_established

CACHE = """\
tcp      6 ESTABLISHED src=10.1.3.3 dst=172.17.0.250 sport=58026 dport=8080 [ASSURED] [active since 1s]
tcp      6 ESTABLISHED src=172.17.0.250 dst=172.17.0.200 sport=41710 dport=8081 [ASSURED] [active since 1s]
tcp      6 TIME_WAIT src=172.17.0.250 dst=172.17.0.200 sport=41728 dport=8081 [ASSURED] [active since 3s]
tcp      6 ESTABLISHED src=10.1.3.3 dst=172.17.0.250 sport=58030 dport=9090 [ASSURED] [active since 1s]
tcp      6 ESTABLISHED src=10.1.3.3 dst=172.17.0.25 sport=58031 dport=8080 [ASSURED] [active since 1s]
udp      17 src=172.17.0.250 dst=172.17.0.200 sport=41371 dport=8081 [active since 3s]
tcp      6 ESTABLISHED src=172.17.0.250 dst=172.17.0.200 sport=41712 dport=8081 src=10.1.3.4 dst=172.17.0.250 \
sport=8080 dport=41712 [ASSURED]
"""


def test_only_established_tcp_flows_to_a_target_count() -> None:
    assert count_established(CACHE, ("172.17.0.250:8080",)) == 1  # not 172.17.0.25, not port 9090
    assert count_established(CACHE, ("172.17.0.200:8081",)) == 2  # not TIME_WAIT, not UDP
    assert count_established(CACHE, ("172.17.0.250:8080", "172.17.0.200:8081")) == 3
    assert count_established(CACHE, ("172.17.0.250:9090", "172.17.0.250:41712")) == 1  # a reply tuple is not it


def test_an_empty_or_foreign_listing_counts_nothing() -> None:
    assert count_established("", ("172.17.0.250:8080",)) == 0
    assert count_established("Error: cannot connect to conntrackd\n", ("172.17.0.250:8080",)) == 0
