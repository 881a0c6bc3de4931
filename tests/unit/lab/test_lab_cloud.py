"""The lab's cloud in front of the gateways (topology ``load_balancer``): its spec, addressing, wiring and nft
table, the health check's state machine and the conntrack reader (docs/load-balancer.md)."""

from __future__ import annotations

import subprocess
from ipaddress import IPv4Address
from typing import Any

import pytest

from magw.lab.build import cloud as lab_cloud
from magw.lab.build import wiring
from magw.lab.errors import LabInputError
from magw.lab.observe.cloud import parse_conntrack
from magw.lab.payload import cloudlb
from magw.lab.spec.cloud import LoadBalancerSpec
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import load_topology, parse_topology
from magw.model.cable import Cable
from tests.support.paths import EXAMPLES

TWO = [{"id": "east"}, {"id": "west", "gateways": 3}]


def _topo(lb: object, **extra: Any) -> Any:
    return parse_topology({"clusters": TWO, "load_balancer": lb, **extra})


def test_the_key_takes_true_a_mapping_or_false() -> None:
    assert _topo(True).load_balancer == LoadBalancerSpec()
    assert _topo(False).load_balancer is None
    assert parse_topology({"clusters": TWO}).load_balancer is None
    spec = _topo({"health_interval": 10, "unhealthy_threshold": 3}).load_balancer
    assert spec == LoadBalancerSpec(health_interval=10.0, unhealthy_threshold=3, healthy_threshold=2)
    topo = load_topology(EXAMPLES / "lab-load-balancer.yaml")
    assert parse_topology(topo.to_doc()) == topo and topo.load_balancer is not None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"health_interval": 0.1}, "load_balancer.health_interval: must be seconds from 0.5 to 60"),
        ({"health_interval": True}, "load_balancer.health_interval: must be seconds"),
        ({"unhealthy_threshold": 0}, "load_balancer.unhealthy_threshold"),
        ({"interval": 5}, "load_balancer.interval: unknown key"),
        ("yes", "load_balancer: "),
    ],
)
def test_a_bad_section_is_one_line_naming_the_key(value: object, message: str) -> None:
    with pytest.raises(LabInputError, match=message.replace(".", r"\.")):
        _topo(value)


def test_wan_shaping_is_refused_behind_a_cloud() -> None:
    with pytest.raises(LabInputError, match="wan_rate: shapes each gateway's own WAN link"):
        _topo(True, wan_rate="10mbit")


def test_one_public_address_per_cluster_and_a_port_per_gateway() -> None:
    lab = layout("t", _topo(True))
    east, west = lab.clusters
    assert east.cloud is not None and west.cloud is not None
    assert (east.cloud.public_ip, west.cloud.public_ip) == (IPv4Address("198.18.0.200"), IPv4Address("198.18.0.201"))
    assert (east.cloud.underlay_ip, east.cloud.namespace) == (IPv4Address("172.17.0.254"), "t-east-cloud")
    assert [(g.public_ip, g.public_port, g.wan_ip, g.nat_source_ip) for g in west.gateways] == [
        (west.cloud.public_ip, 45001 + k, None, IPv4Address("198.18.0.211")) for k in range(3)
    ]
    assert all(n.public_port is None and n.public_ip is None for n in lab.nodes if not n.gateway)
    assert {"t-east-cloud", "t-west-cloud"} <= set(lab.namespaces)
    plain = layout("t", parse_topology({"clusters": TWO}))
    assert all(c.cloud is None for c in plain.clusters)
    assert all(g.wan_ip == g.public_ip and g.public_port is None for g in plain.gateways)


def test_gateways_reach_the_wan_through_the_cloud_only() -> None:
    lab = layout("t", _topo(True))
    east = lab.clusters[0]
    cmds = wiring.node_commands(lab, east, east.gateways[0])
    assert not [c for c in cmds if "wan0" in c]
    assert "route add 198.18.0.0/24 via 172.17.0.254 dev eth0" in cmds
    assert wiring.wan_ports(lab) == ["east-lb", "west-lb"]
    assert wiring.underlay_ports(east)[-1] == "lb"
    links = lab_cloud.link_commands(lab, east, east.cloud)  # type: ignore[arg-type]
    assert "addr add 198.18.0.200/24 dev wan0" in links and "addr add 172.17.0.254/24 dev eth0" in links
    assert "addr add 198.18.0.210/24 dev wan0" in links  # the NAT gateway's address


def test_the_cloud_table_lists_every_gateway_and_the_cable_port() -> None:
    topo = _topo(True)
    lab = layout("t", topo)
    west = lab.clusters[1]
    script = lab_cloud.nft_script(lab, west, west.cloud)  # type: ignore[arg-type]
    assert "elements = { 45001, 45002, 45003 }" in script
    assert "45001 : 172.18.0.11 . 4500, 45002 : 172.18.0.12 . 4500, 45003 : 172.18.0.13 . 4500" in script
    assert "snat ip to 198.18.0.211:20000-40000 random" in script  # the NAT's address, not the load balancer's
    wg = layout("t", parse_topology({**topo.to_doc(), "cable": Cable.WIREGUARD.value}))
    assert "45001 : 172.18.0.11 . 51820" in lab_cloud.nft_script(wg, wg.clusters[1], wg.clusters[1].cloud)  # type: ignore[arg-type]
    argv = lab_cloud.checker_argv(lab, west, 9102)
    assert argv[argv.index("--interval") + 1] == "5" and "45003=172.18.0.13:4500:9102" in argv


def test_the_listener_ports_and_the_nat_ports_do_not_overlap() -> None:
    low, high = (int(p) for p in lab_cloud.LISTENER_PORTS.split("-"))
    assert high < lab_cloud.NAT_PORTS[0] or low > lab_cloud.NAT_PORTS[1]


# ---- the health check --------------------------------------------------------------------------------------------


def test_a_backend_argument_is_checked() -> None:
    b = cloudlb.parse_backend("45002=172.17.0.12:4500:9102")
    got = (b.port, b.ip, b.target_port, b.check_port, b.healthy)
    assert got == (45002, IPv4Address("172.17.0.12"), 4500, 9102, True)
    for bad in ("45002", "45002=172.17.0.12:4500", "x=172.17.0.12:4500:9102", "1=300.1.1.1:1:1"):
        with pytest.raises(Exception, match="expected PORT=IP:TARGET_PORT:CHECK_PORT"):
            cloudlb.parse_backend(bad)


def test_a_change_is_one_transaction_over_the_set_and_the_map() -> None:
    b = cloudlb.parse_backend("45001=172.17.0.11:4500:9102")
    assert cloudlb.nft_change("tab", b, up=False) == (
        "delete element ip tab live { 45001 }\ndelete element ip tab listeners { 45001 }\n"
    )
    assert cloudlb.nft_change("tab", b, up=True) == (
        "add element ip tab live { 45001 }\nadd element ip tab listeners { 45001 : 172.17.0.11 . 4500 }\n"
    )


def test_thresholds_take_a_backend_out_and_bring_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Results fed in order: out after 2 failures in a row (a single failure is forgiven), back after 3 passes."""
    results = iter([False, True, False, False, False, True, True, False, True, True, True])
    scripts: list[str] = []
    monkeypatch.setattr(cloudlb, "check", lambda b, timeout: next(results))

    def run(argv: list[str], *, input: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        scripts.append(input)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(cloudlb.subprocess, "run", run)
    b = cloudlb.parse_backend("45001=172.17.0.11:4500:9102")
    states = []
    for _ in range(11):
        cloudlb.step("tab", [b], unhealthy=2, healthy=3, timeout=0.1)
        states.append(b.healthy)
    assert states == [True, True, True, False, False, False, False, False, False, False, True]
    assert [s.split()[0] for s in scripts] == ["delete", "add"]


def test_a_failed_nft_change_leaves_the_backend_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cloudlb, "check", lambda b, timeout: False)
    failed = subprocess.CompletedProcess(["nft"], 1, "", "Error: no such table")
    monkeypatch.setattr(cloudlb.subprocess, "run", lambda argv, **kw: failed)
    b = cloudlb.parse_backend("45001=172.17.0.11:4500:9102")
    for _ in range(3):
        cloudlb.step("tab", [b], unhealthy=1, healthy=1, timeout=0.1)
    assert b.healthy


# ---- what the cloud's conntrack says -------------------------------------------------------------------------------

# Lines as conntrack 1.4.7 prints them in a lab cloud: a remote gateway's packets DNATed to a gateway, and a
# gateway's packets SNATed with a new source port.
CONNTRACK = (
    "udp      17 27 src=198.18.0.201 dst=198.18.0.200 sport=33210 dport=45001 [UNREPLIED] src=172.17.0.11 "
    "dst=198.18.0.201 sport=4500 dport=33210 mark=0 use=1\n"
    "udp      17 27 src=172.17.0.12 dst=198.18.0.201 sport=39146 dport=45002 [UNREPLIED] src=198.18.0.201 "
    "dst=198.18.0.200 sport=45002 dport=21399 mark=0 use=1\n"
    "conntrack v1.4.7 (conntrack-tools): 2 flow entries have been shown.\n"
)


def test_the_conntrack_reader_tells_what_each_side_sees() -> None:
    dnat, snat = parse_conntrack(CONNTRACK)
    assert (dnat.orig_dst, dnat.orig_dport, dnat.out_dst, dnat.out_dport) == (
        IPv4Address("198.18.0.200"), 45001, IPv4Address("172.17.0.11"), 4500,
    )  # fmt: skip
    assert (snat.orig_src, snat.orig_sport, snat.out_src, snat.out_sport) == (
        IPv4Address("172.17.0.12"), 39146, IPv4Address("198.18.0.200"), 21399,
    )  # fmt: skip
    assert parse_conntrack("garbage\nudp 17 src=1.2.3.4\n") == []
