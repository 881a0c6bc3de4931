"""``magw diagnose``'s verdict logic, fed readings (no kernel): each check's verdict and fix."""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

import pytest

from magw.ops.diagnose.clock import ClockSample, clock_checks, skew_of
from magw.ops.diagnose.cni import StaleReadings, cni_checks, detect_cni, stale_checks
from magw.ops.diagnose.kernel import KernelReadings, kernel_checks
from magw.ops.diagnose.mtu import PathProbe, TunnelMtu, mtu_checks, path_checks
from magw.ops.diagnose.paths import CableProbe
from magw.ops.diagnose.paths import path_checks as cable_checks
from magw.ops.diagnose.shadow import Resolution, nft_checks, route_checks, rule_checks
from magw.ops.diagnose.sysctl import SysctlReadings, sysctl_checks
from magw.ops.diagnose.verdict import Check, NodeReport, Verdict, exit_status, failed, passed, text_lines, warned

PRE = "ip netns exec n1 "


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def _kernel(**kw: object) -> KernelReadings:
    base: dict[str, object] = {"kernel": "6.1.0", "nexthops": True, "resilient": True, "nft": "1.0.6",
                               "iproute2": "6.1.0", "modules": {"vxlan": "loaded"}, "wireguard_go": None,
                               "cable": "vxlan"}
    base.update(kw)
    return KernelReadings(**base)  # type: ignore[arg-type]


def test_kernel_without_vxlan_or_nft_fails_and_old_kernels_warn() -> None:
    checks = _by_name(kernel_checks(_kernel(modules={}, nft=None, nexthops=False, resilient=False)))
    assert checks["cable: vxlan"].verdict is Verdict.FAIL and "modprobe vxlan" in checks["cable: vxlan"].fix
    assert checks["nft"].verdict is Verdict.FAIL and checks["nft"].fix == "apt-get install nftables"
    assert checks["nexthop objects"].verdict is Verdict.WARN
    assert checks["resilient groups"].verdict is Verdict.WARN and "5.13" in checks["resilient groups"].fix


def test_the_wireguard_cable_needs_the_module_or_wireguard_go() -> None:
    none = _by_name(kernel_checks(_kernel(cable="wireguard")))["cable: wireguard"]
    assert none.verdict is Verdict.FAIL and "wireguard-go" in none.fix
    go = _by_name(kernel_checks(_kernel(cable="wireguard", wireguard_go="/usr/bin/wireguard-go")))
    assert go["cable: wireguard"].verdict is Verdict.PASS
    unknown = _by_name(kernel_checks(_kernel(cable=None)))["cable: wireguard"]
    assert unknown.verdict is Verdict.WARN  # no cable known: only vxlan possible, not a failure
    assert "cable: wireguard" not in _by_name(kernel_checks(_kernel()))


def test_sysctl_effective_rp_filter_is_the_max_of_all_and_the_device() -> None:
    r = SysctlReadings(hash_policy=1, ip_forward=1, rp_filter={"all": 1, "vxlan-tunnel": 0, "vx-submariner": 2},
                       netns_flag=PRE)
    checks = _by_name(sysctl_checks(r))
    assert checks["rp_filter vxlan-tunnel"].verdict is Verdict.FAIL
    assert checks["rp_filter vxlan-tunnel"].fix == PRE + "sysctl -w net.ipv4.conf.all.rp_filter=2"
    assert checks["rp_filter vx-submariner"].verdict is Verdict.PASS  # max(1, 2) = 2, loose


def test_sysctl_forwarding_off_and_l3_hash_fail() -> None:
    checks = _by_name(sysctl_checks(SysctlReadings(hash_policy=0, ip_forward=0, rp_filter={"all": 0},
                                                   netns_flag="")))
    assert checks["net.ipv4.ip_forward"].fix == "sysctl -w net.ipv4.ip_forward=1"
    assert checks["net.ipv4.fib_multipath_hash_policy"].verdict is Verdict.FAIL
    assert checks["rp_filter"].verdict is Verdict.WARN  # no magw device at all


def test_mtu_room_is_the_underlay_minus_the_overhead() -> None:
    ok = TunnelMtu(device="vxlan-tunnel", mtu=1450, underlay="wan0", underlay_mtu=1500)
    big = TunnelMtu(device="vx-submariner", mtu=1400, underlay="eth0", underlay_mtu=1400)
    wg_fits = TunnelMtu(device="wg0", mtu=1440, underlay="wan0", underlay_mtu=1500, overhead=60)
    wg_big = TunnelMtu(device="wg1", mtu=1460, underlay="wan0", underlay_mtu=1500, overhead=60)
    checks = _by_name(mtu_checks([ok, big, wg_fits, wg_big], PRE))
    assert checks["vxlan-tunnel mtu"].verdict is Verdict.PASS
    assert checks["vx-submariner mtu"].verdict is Verdict.FAIL
    assert checks["vx-submariner mtu"].fix.startswith(PRE + "ip link set vx-submariner mtu 1350")
    assert checks["wg0 mtu"].verdict is Verdict.PASS  # 1500 - 60 = 1440: fits exactly
    assert checks["wg1 mtu"].verdict is Verdict.FAIL
    unknown = mtu_checks([TunnelMtu(device="vxlan-tunnel", mtu=1450, underlay=None, underlay_mtu=None)], PRE)
    assert unknown[0].verdict is Verdict.WARN
    assert [c.verdict for c in mtu_checks([], PRE)] == [Verdict.WARN]  # nothing to check is said, not passed


def test_path_mtu_probe_verdicts() -> None:
    checks = path_checks([PathProbe(device="vxlan-tunnel", target="198.18.0.21", size=1500, answered=False,
                                    error="send: Message too long"),
                          PathProbe(device="vxlan-tunnel", target="198.18.0.22", size=1500, answered=True)], PRE)
    assert [c.verdict for c in checks] == [Verdict.FAIL, Verdict.PASS]
    assert "Message too long" in checks[0].detail


def test_cable_paths_name_the_port_and_spare_a_passive_gateway() -> None:
    probes = [CableProbe(device="vxlan-tunnel", vtep="241.18.0.11", underlay="198.18.0.21", answered=False),
              CableProbe(device="vxlan-tunnel", vtep="241.18.0.12", underlay="198.18.0.22", answered=False,
                         agent_state="unknown"),
              CableProbe(device="vx-submariner", vtep="240.17.0.12", underlay="172.17.0.12", answered=False,
                         agent_state="up")]
    blocked, passive, local = cable_checks(probes, PRE)
    assert blocked.verdict is Verdict.FAIL and "allow UDP 4500 between this node and 198.18.0.21" in blocked.fix
    assert passive.verdict is Verdict.PASS and "passive" in passive.detail
    assert local.verdict is Verdict.FAIL and "UDP 4800" in local.fix


def _sample(offset: float, *, rtt: float = 0.2) -> ClockSample:
    ours = 1_800_000_000.0
    return ClockSample(reference="https://api:6443/version", sent=ours, received=ours + rtt,
                       date_header=formatdate(ours + rtt / 2 + offset, usegmt=True))


def test_clock_skew_against_an_injected_reference() -> None:
    skew, err = skew_of(_sample(60.0)) or (0.0, 0.0)
    assert 59.0 <= skew <= 60.0  # the header has whole seconds: the reference's 60.1 s reads as 60
    assert err == pytest.approx(1.1)  # half the round trip plus the header's one second
    assert [c.verdict for c in clock_checks([_sample(0.0), _sample(10.0), _sample(-60.0)])] == [
        Verdict.PASS, Verdict.WARN, Verdict.FAIL]
    assert "NTP" in clock_checks([_sample(-60.0)])[0].fix


def test_clock_without_a_reference_or_a_date_warns() -> None:
    assert clock_checks([])[0].verdict is Verdict.WARN
    missing = ClockSample(reference="u", sent=1.0, received=2.0, date_header=None, error="connection refused")
    assert clock_checks([missing])[0].verdict is Verdict.WARN
    assert "connection refused" in clock_checks([missing])[0].detail


def test_shadowed_routes_and_foreign_rules() -> None:
    ours = Resolution(cidr="10.2.0.0/16", dev="vxlan-tunnel", table="100", probe="10.2.0.1", source="10.1.1.1",
                      got_dev="vxlan-tunnel", got_table="100")
    shadowed = Resolution(cidr="100.2.0.0/16", dev="vxlan-tunnel", table="100", probe="100.2.0.1", source=None,
                          got_dev="eth0", got_table="main")
    assert [c.verdict for c in route_checks([ours, shadowed], PRE)] == [Verdict.PASS, Verdict.FAIL]
    rules = [{"priority": 0, "src": "all", "table": "local"}, {"priority": 50, "src": "all", "table": "7"},
             {"priority": 100, "src": "all", "table": "100", "protocol": "157"},
             {"priority": 32766, "src": "all", "table": "main"}]
    checks = rule_checks(rules, PRE)
    assert [(c.name, c.verdict) for c in checks] == [("rule 50", Verdict.WARN)]
    assert rule_checks(rules[:1] + rules[2:], PRE)[0].verdict is Verdict.PASS


def _chain(table: str, name: str, hook: str, prio: int, policy: str = "accept", kind: str = "filter"
           ) -> dict[str, Any]:
    return {"chain": {"family": "ip", "table": table, "name": name, "type": kind, "hook": hook, "prio": prio,
                      "policy": policy}}


def _rule(table: str, chain: str, *verbs: str) -> dict[str, Any]:
    return {"rule": {"family": "ip", "table": table, "chain": chain, "expr": [{v: None} for v in verbs]}}


def test_nft_chains_that_drop_or_nat_before_ours() -> None:
    ruleset = [
        _chain("magw", "postrouting", "postrouting", 90, kind="nat"),
        _chain("cni", "early", "postrouting", 50, kind="nat"), _rule("cni", "early", "masquerade"),
        _chain("cni", "late", "postrouting", 100, kind="nat"), _rule("cni", "late", "masquerade"),
        _chain("fw", "closed", "forward", 0, policy="drop"),
        _chain("fw", "guarded", "forward", 0, policy="drop"), _rule("fw", "guarded", "accept"),
        _chain("fw", "picky", "input", 0), _rule("fw", "picky", "reject"),
    ]
    checks = _by_name(nft_checks(ruleset, PRE))
    assert checks["nft ip cni early"].verdict is Verdict.FAIL
    assert "nft ip cni late" not in checks  # after ours: our null SNAT matched first
    assert checks["nft ip fw closed"].verdict is Verdict.FAIL
    assert checks["nft ip fw guarded"].verdict is Verdict.WARN
    assert checks["nft ip fw picky"].verdict is Verdict.WARN
    assert nft_checks([ruleset[0]], PRE)[0].verdict is Verdict.PASS


def test_cni_detection_and_stale_gateway_objects_on_a_worker() -> None:
    assert detect_cni({"lo", "eth0", "cni0"}, set()) == ["generic bridge"]
    assert detect_cni({"br-int", "genev_sys_6081"}, set()) == ["ovn-kubernetes"]
    assert detect_cni(set(), {"ovn-controller.42.ctl"}) == ["ovn-kubernetes"]
    assert cni_checks({"lo"}, set())[0].verdict is Verdict.WARN
    worker = StaleReadings(gateway=False, links={"vxlan-tunnel", "vx-submariner"}, nft_tables={"magw_health"},
                           gateway_routes=2, dangling_devices={"vxlan-old"})
    checks = _by_name(stale_checks(worker, PRE, "n1"))
    gw = checks["gateway objects"]
    assert gw.verdict is Verdict.WARN and "magw_health" in gw.detail and "2 routes in table 100" in gw.detail
    assert gw.fix.startswith("magw cleanup --netns n1")
    assert checks["device vxlan-old"].verdict is Verdict.WARN
    gateway = StaleReadings(gateway=True, links={"vxlan-tunnel"}, nft_tables={"magw_health"}, gateway_routes=2,
                            dangling_devices=set())
    assert [c.verdict for c in stale_checks(gateway, PRE, "n1")] == [Verdict.PASS]


def test_exit_status_and_text() -> None:
    good = NodeReport(node="a", netns="ns-a", checks=(passed("t", "x", "ok"), warned("t", "y", "hmm", "do y")))
    bad = NodeReport(node="b", netns=None, checks=(failed("t", "z", "broken", "do z"),))
    assert exit_status([good]) == 0 and exit_status([good, bad]) == 1
    lines = text_lines([good, bad])
    assert lines[0] == "== a (netns ns-a): warn"
    assert "     fix: do z" in lines and lines[-1] == "1 passed, 1 warnings, 1 failed"


def test_through_wireguard_the_fix_names_wireguards_port() -> None:
    probe = CableProbe(device="vxlan-tunnel", vtep="241.18.0.11", underlay="242.18.0.11", answered=False, port=51820)
    check = cable_checks([probe], PRE)[0]
    assert check.verdict is Verdict.FAIL and check.fix.startswith("allow UDP 51820 (WireGuard) both ways between")
