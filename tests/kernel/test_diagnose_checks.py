"""``magw diagnose`` against a real kernel: two throwaway namespaces joined by a veth, each with a
``vx-submariner`` VXLAN (port 4800) to the other, and a magw route (proto 157) for a remote CIDR in ``a``. The
healthy pair passes; then each thing is broken on purpose and the verdict must say fail (or warn) with the fix.
Only namespaces made here are touched; the echoes are single packets with a timeout.
"""

from __future__ import annotations

import subprocess

import pytest

from magw.ops.diagnose.node import NodeContext, diagnose_node
from magw.ops.diagnose.verdict import Check, Verdict
from tests.support.netns import VethPair, run

pytestmark = pytest.mark.kernel

IPS = {"a": "172.66.0.1", "b": "172.66.0.2"}
VTEPS = {"a": "240.66.0.1", "b": "240.66.0.2"}
MACS = {"a": "02:53:f0:66:00:01", "b": "02:53:f0:66:00:02"}
REMOTE = "10.2.0.0/16"


def _node(ns: str, me: str, peer: str, dev: str) -> None:
    run(ns, "ip", "addr", "add", f"{IPS[me]}/24", "dev", dev)
    run(ns, "ip", "link", "add", "vx-submariner", "address", MACS[me], "type", "vxlan", "id", "100", "dstport",
        "4800", "local", IPS[me], "nolearning")
    run(ns, "ip", "link", "set", "vx-submariner", "mtu", "1450", "up")
    run(ns, "ip", "addr", "add", f"{VTEPS[me]}/8", "dev", "vx-submariner")
    run(ns, "ip", "neigh", "replace", VTEPS[peer], "lladdr", MACS[peer], "dev", "vx-submariner", "nud", "permanent")
    run(ns, "bridge", "fdb", "append", MACS[peer], "dev", "vx-submariner", "dst", IPS[peer], "self", "permanent")
    run(ns, "ip", "link", "add", "cni0", "type", "bridge")
    run(ns, "ip", "link", "set", "cni0", "up")
    run(ns, "ip", "addr", "add", "10.1.1.1/24" if me == "a" else "10.2.1.1/24", "dev", "cni0")
    for key, value in (("net.ipv4.ip_forward", "1"), ("net.ipv4.fib_multipath_hash_policy", "1"),
                       ("net.ipv4.conf.all.rp_filter", "0"), ("net.ipv4.conf.vx-submariner.rp_filter", "0")):
        run(ns, "sysctl", "-qw", f"{key}={value}")


@pytest.fixture
def pair(veth_pair: VethPair) -> VethPair:
    _node(veth_pair.a, "a", "b", veth_pair.a_dev)
    _node(veth_pair.b, "b", "a", veth_pair.b_dev)
    run(veth_pair.a, "ip", "route", "add", REMOTE, "via", VTEPS["b"], "dev", "vx-submariner", "proto", "157",
        "src", "10.1.1.1", "metric", "100")
    return veth_pair


def _checks(ns: str, *topics: str) -> list[Check]:
    return list(diagnose_node(NodeContext(name="a", netns=ns), topics).checks)


def _one(checks: list[Check], topic: str, name: str) -> Check:
    found = [c for c in checks if c.topic == topic and c.name == name]
    assert len(found) == 1, [c.name for c in checks]
    return found[0]


def test_a_healthy_pair_passes_every_check(pair: VethPair) -> None:
    checks = _checks(pair.a, "sysctl", "mtu", "firewall", "shadow", "stale", "cni")
    assert [(c.topic, c.name, c.detail) for c in checks if c.verdict is not Verdict.PASS] == []
    names = {(c.topic, c.name) for c in checks}
    assert ("firewall", f"vx-submariner -> {VTEPS['b']} via {IPS['b']}") in names
    assert ("mtu", f"path mtu vx-submariner -> {IPS['b']}") in names
    assert ("shadow", f"route {REMOTE}") in names


def test_wrong_hash_policy_and_strict_rp_filter_fail_with_the_sysctl_to_set(pair: VethPair) -> None:
    run(pair.a, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=0")
    run(pair.a, "sysctl", "-qw", "net.ipv4.conf.vx-submariner.rp_filter=1")
    checks = _checks(pair.a, "sysctl")
    policy = _one(checks, "sysctl", "net.ipv4.fib_multipath_hash_policy")
    assert policy.verdict is Verdict.FAIL
    assert f"ip netns exec {pair.a} sysctl -w net.ipv4.fib_multipath_hash_policy=1" in policy.fix
    rp = _one(checks, "sysctl", "rp_filter vx-submariner")
    assert rp.verdict is Verdict.FAIL
    assert rp.fix == f"ip netns exec {pair.a} sysctl -w net.ipv4.conf.vx-submariner.rp_filter=2"


def test_a_rule_and_route_before_ours_shadow_the_remote_cidr(pair: VethPair) -> None:
    run(pair.a, "ip", "route", "add", REMOTE, "dev", pair.a_dev, "table", "200")
    run(pair.a, "ip", "rule", "add", "pref", "50", "to", REMOTE, "lookup", "200")
    checks = _checks(pair.a, "shadow")
    route = _one(checks, "shadow", f"route {REMOTE}")
    assert route.verdict is Verdict.FAIL
    assert f"dev {pair.a_dev} table 200" in route.detail
    rule = _one(checks, "shadow", "rule 50")
    assert rule.verdict is Verdict.WARN
    assert "lookup 200" in rule.detail and rule.fix.endswith("ip rule del priority 50")


def test_foreign_nft_chains_that_drop_or_nat_before_ours_fail(pair: VethPair) -> None:
    ruleset = (
        "table ip magw {\n chain postrouting {\n  type nat hook postrouting priority srcnat - 10;\n }\n}\n"
        "table ip foreign {\n"
        " chain filter_fwd {\n  type filter hook forward priority -5; policy drop;\n }\n"
        " chain masq {\n  type nat hook postrouting priority srcnat - 50;\n  ip saddr 10.1.0.0/16 masquerade\n }\n"
        "}\n"
    )
    _nft(pair.a, ruleset)
    checks = _checks(pair.a, "shadow")
    fwd = _one(checks, "shadow", "nft ip foreign filter_fwd")
    assert fwd.verdict is Verdict.FAIL and "policy drop" in fwd.detail
    nat = _one(checks, "shadow", "nft ip foreign masq")
    assert nat.verdict is Verdict.FAIL and "before magw's (priority 90)" in nat.detail


def _nft(ns: str, ruleset: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=ruleset, text=True, check=True, timeout=60)


def test_a_tunnel_mtu_too_big_for_its_underlay_fails_with_the_mtu_to_set(pair: VethPair) -> None:
    run(pair.a, "ip", "link", "set", "vx-submariner", "mtu", "1500")
    check = _one(_checks(pair.a, "mtu"), "mtu", "vx-submariner mtu")
    assert check.verdict is Verdict.FAIL
    assert check.fix.startswith(f"ip netns exec {pair.a} ip link set vx-submariner mtu 1450")


def test_a_path_narrower_than_a_full_tunnel_packet_fails(pair: VethPair) -> None:
    run(pair.b, "ip", "link", "set", pair.b_dev, "mtu", "1400")
    check = _one(_checks(pair.a, "mtu"), "mtu", f"path mtu vx-submariner -> {IPS['b']}")
    assert check.verdict is Verdict.FAIL
    assert "1500 bytes with DF not answered" in check.detail


def test_a_blocked_cable_port_fails_the_firewall_path_naming_the_port(pair: VethPair) -> None:
    _nft(pair.b, "table inet block {\n chain input {\n  type filter hook input priority 0;\n"
         "  udp dport 4800 drop\n }\n}\n")
    check = _one(_checks(pair.a, "firewall"), "firewall", f"vx-submariner -> {VTEPS['b']} via {IPS['b']}")
    assert check.verdict is Verdict.FAIL
    assert f"allow UDP 4800 between this node and {IPS['b']}" in check.fix
