"""The egress gateway on OVN-Kubernetes with real packets: ``magw lab up --cni ovn --topology
examples/lab-egress-gateway.yaml``, with either control plane.

On OVN a pod's packet to the outside never crosses its node's kernel routing; the OVN syncer's reroute policies
(``magw.desired.ovn.egress``) bring each node's bound pods into that node's own management port, and the datapath of
docs/egress-datapath.md takes them from there. The oracles: the example's text (``tests/lab/test_lab_egress.py``'s
table: what the outside server *saw*), the policies read with ``ovn-nbctl``, each node's ``ovn-k8s-mp0`` address
read with ``ip``, and the VIPs' holders as ``magw lab status`` reads them from the kernels.

The lab models no ``GR_<node>`` external side, so an unbound pod has no way out at all there: it must not leave
as a VIP, which is all that is checked of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.ovn import ovn_dir
from magw.lab.planes.ovn_nodes import ovs_missing
from magw.lab.planes.ovn_servers import ovn_missing
from magw.lab.planes.ovn_topology import nbctl
from tests.lab.test_lab_egress import (
    EXAMPLE,
    EXPECTED,
    OUTSIDE,
    VIP_SHOP,
    VIP_WEB,
    assert_survived,
    fail_shops_holder_under_connections,
    probe,
    seen,
)
from tests.support.cli import MagwCli
from tests.support.labkit import mgmt_address, unique_name

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ovn,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

BOUND = {ns: vip for ns, vip in EXPECTED.items() if vip in (VIP_SHOP, VIP_WEB)}
UNBOUND = [ns for ns in EXPECTED if ns not in BOUND]
# The example's bound pods by node (its text): w1 has cart-0 and web-0, w2 cart-1 and pay-0; gw1 and gw2 none.
BOUND_NODES = {"east-w1": 2, "east-w2": 2}


@pytest.fixture(scope="module", params=["file", "kube"])
def lab(request: pytest.FixtureRequest, magw_cli: MagwCli) -> Iterator[LabState]:
    """Either control plane: with ``kube`` the OVN syncer is hosted by a worker's route agent, which reads the
    egress kinds from the API server emulator (``--egress``)."""
    reason = ovn_missing() or ovs_missing()
    if reason:
        pytest.skip(reason)
    name = unique_name()
    try:
        up = magw_cli("lab", "up", "--name", name, "--cni", "ovn", "--control-plane", request.param, "--topology",
                      str(EXAMPLE), "--timeout", "90", timeout=300)  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        st = state.read(name)
        assert st is not None and st.ovn
        yield st
    finally:
        magw_cli("lab", "down", "--name", name)


def _egress_policies(lab: LabState) -> list[tuple[int, str, str, str]]:
    """(priority, match, action, nexthops) of every policy on east's NB that names an egress address set."""
    out = nbctl(ovn_dir(lab, "east"), "--format=json", "--columns=priority,match,action,nexthops", "list",
                "Logical_Router_Policy")  # fmt: skip
    rows = [(r[0], r[1], r[2], json.dumps(r[3])) for r in json.loads(out)["data"]]
    return sorted(r for r in rows if "$magw_egress_" in r[1])


def _address_set(lab: LabState, name: str) -> set[str]:
    out = nbctl(ovn_dir(lab, "east"), "--bare", "--columns=addresses", "find", "Address_Set", f"name={name}")
    return set(out.split())


@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_each_bound_pod_leaves_as_its_vip(lab: LabState, proto: str) -> None:
    assert {ns: seen(lab, ns, f"{proto}:{OUTSIDE}:8080") for ns in BOUND} == BOUND
    for ns in UNBOUND:
        assert seen(lab, ns, f"{proto}:{OUTSIDE}:8080") not in (VIP_SHOP, VIP_WEB), ns


def test_each_node_with_bound_pods_has_a_reroute_into_its_own_management_port(lab: LabState) -> None:
    """Read with ovn-nbctl: per node with bound pods, an allow above a reroute to the node's ``ovn-k8s-mp0`` (read
    with ip), its address set holding exactly that node's bound pods; no policy negates a set."""
    policies = _egress_policies(lab)
    reroutes = {p[1]: json.loads(p[3]) for p in policies if p[2] == "reroute"}
    assert len(reroutes) == len(BOUND_NODES) and len(policies) == 2 * len(BOUND_NODES), policies
    assert not any("!=" in p[1] for p in policies), policies
    for node, count in BOUND_NODES.items():
        # The set's name: magw_egress_ + the node name made a valid OVN identifier (east_w1_<crc>).
        (match,) = (m for m in reroutes if m.startswith(f"ip4.src == $magw_egress_{node.replace('-', '_')}_"))
        assert reroutes[match] == mgmt_address(f"{lab.name}-{node}"), (node, reroutes)
        assert len(_address_set(lab, match.removeprefix("ip4.src == $"))) == count, node
    assert {p[0] for p in policies} == {19000, 19001}


@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_ingress_through_the_vip_keeps_the_client_ip(lab: LabState, proto: str) -> None:
    web = probe(lab, "outside", f"{proto}:{VIP_WEB}:8080")
    assert (web["ok"], web["server"], web["seen_ip"]) == (True, "east-web-0", OUTSIDE)
    pay = probe(lab, "outside", f"{proto}:{VIP_SHOP}:8081")
    assert (pay["ok"], pay["server"], pay["seen_ip"]) == (True, "east-pay-0", OUTSIDE)


def test_hairpin_snats_to_the_source_services_vip(lab: LabState) -> None:
    doc = probe(lab, "east-w1-p2", f"tcp:{VIP_WEB}:8080")
    assert (doc["ok"], doc["server"], doc["seen_ip"]) == (True, "east-web-0", VIP_SHOP)


def test_zz_failover_moves_the_vips_changes_no_ovn_row_and_connections_survive(
    lab: LabState, magw_cli: MagwCli
) -> None:
    """Last (it fails a node): VIP shop's holder fails with TCP connections open through the egress SNAT and the
    ingress DNAT; they go on through the new holder (conntrackd), new ones leave as the same VIP, and the egress
    policies in the NB are the same rows as before (they name the pods' nodes, never the holder)."""
    before = _egress_policies(lab)
    for (way, who), doc in fail_shops_holder_under_connections(lab, magw_cli, ("client",)).items():
        assert_survived(way, who, doc)
    assert seen(lab, "east-w2-p2", f"udp:{OUTSIDE}:8080") == VIP_SHOP
    assert _egress_policies(lab) == before
