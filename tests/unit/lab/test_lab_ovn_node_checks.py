"""``magw lab verify``'s node checks judge what the kernel and ovs-vsctl answered (pure: no lab needed)."""

from __future__ import annotations

from magw.lab.verify.ovn_node import _bridge_check, _route_check


def test_a_route_check_passes_only_on_the_expected_device_next_hop_and_table() -> None:
    good = {"dst": "10.2.2.2", "gateway": "169.254.253.1", "dev": "ovn-k8s-mp0", "table": "150"}
    assert _route_check("w", good, "ovn-k8s-mp0", "169.254.253.1", "150").ok
    main = {"dst": "10.2.2.2", "gateway": "172.17.0.1", "dev": "eth0"}  # no table: the main table
    check = _route_check("w", main, "ovn-k8s-mp0", "169.254.253.1", "150")
    assert not check.ok and "table main (expected via 169.254.253.1 dev ovn-k8s-mp0 table 150)" in check.text
    assert not _route_check("w", {**good, "table": "100"}, "ovn-k8s-mp0", "169.254.253.1", "150").ok
    failed = _route_check("w", {"error": "Network is unreachable"}, "ovn-k8s-mp0", "169.254.253.1", "150")
    assert not failed.ok and "Network is unreachable" in failed.text


def test_a_bridge_check_needs_the_port_the_userspace_datapath_and_the_mapping() -> None:
    good = {"ports": "ovn-k8s-sub0", "datapath": "netdev", "mappings": "physnet:br-ex,submariner_gateway:br-submariner"}
    assert _bridge_check("east-gw1", good).ok
    assert not _bridge_check("east-gw1", {**good, "ports": ""}).ok
    assert not _bridge_check("east-gw1", {**good, "datapath": "system"}).ok
    assert not _bridge_check("east-gw1", {**good, "mappings": "physnet:br-ex"}).ok
    missing = _bridge_check("east-gw1", {**good, "ports": "error: no bridge named br-submariner"})
    assert not missing.ok and "no bridge named br-submariner" in missing.text
