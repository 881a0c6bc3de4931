"""Gateways added to a running lab, as the topology and the layout see them (``added_gateways``; docs/lab.md)."""

from __future__ import annotations

from ipaddress import IPv4Address
from pathlib import Path

import attrs
import pytest

from magw.lab.build import grow, state, wiring
from magw.lab.build.state import LabState
from magw.lab.errors import LabError, LabInputError
from magw.lab.spec import naming
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import default_topology, parse_topology


def grown(added: int = 1, gateways: int = 2) -> dict[str, object]:
    spec = {"gateways": gateways, "workers": 2, "pods_per_node": 2}
    return {"clusters": [{"id": "east", **spec, "added_gateways": added}, {"id": "west", **spec}]}


def test_added_gateways_come_after_the_workers_without_pods_and_move_nothing() -> None:
    plain = layout("magw", parse_topology({**grown(0)}))
    more = layout("magw", parse_topology(grown(2)))
    east = more.cluster("east")
    assert [n.name for n in east.nodes] == ["east-gw1", "east-gw2", "east-w1", "east-w2", "east-gw3", "east-gw4"]
    gw3, gw4 = east.nodes[4:]
    assert (gw3.role, gw3.node_ip, gw3.wan_ip, gw3.public_ip, str(gw3.pod_subnet), gw3.cni_ip) == (
        "gateway", IPv4Address("172.17.0.13"), IPv4Address("198.18.0.13"), IPv4Address("198.18.0.13"),
        "10.1.5.0/24", IPv4Address("10.1.5.1"))  # fmt: skip
    assert (gw4.node_ip, str(gw4.pod_subnet)) == (IPv4Address("172.17.0.14"), "10.1.6.0/24")
    assert not east.pods_of(gw3.name) and not east.pods_of(gw4.name)
    # every node, pod and service of the lab as it was stays as it was
    assert all(more.node(n.name) == n for n in plain.nodes)
    assert more.pods == plain.pods and east.services == plain.cluster("east").services
    assert [g.name for g in east.gateways] == ["east-gw1", "east-gw2", "east-gw3", "east-gw4"]


def test_the_topology_document_keeps_added_gateways_and_a_plain_one_has_no_key() -> None:
    topo = parse_topology(grown(1))
    assert parse_topology(topo.to_doc()) == topo
    assert topo.to_doc()["clusters"][0]["added_gateways"] == 1
    assert "added_gateways" not in default_topology().to_doc()["clusters"][0]
    assert attrs.evolve(topo.clusters[0], added_gateways=0) == parse_topology(grown(0)).clusters[0]


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        (grown(1, gateways=8), "clusters[0].added_gateways"),
        (grown(-1), "clusters[0].added_gateways"),
        (grown(8, gateways=1), "clusters[0].added_gateways"),
    ],
)
def test_more_gateways_than_a_cluster_may_have_are_refused(doc: dict[str, object], said: str) -> None:
    with pytest.raises(LabInputError, match=said.replace("[", r"\[").replace("]", r"\]")):
        parse_topology(doc)


def test_eight_gateways_in_all_are_allowed() -> None:
    east = layout("magw", parse_topology(grown(6, gateways=2))).cluster("east")
    assert [g.wan_ip for g in east.gateways][-1] == IPv4Address("198.18.0.18")  # below west's 198.18.0.21


def test_a_links_mac_is_its_address_so_a_node_made_again_keeps_it() -> None:
    assert wiring.link_mac(IPv4Address("172.17.0.13")) == "02:1a:ac:11:00:0d"
    assert wiring.link_mac(IPv4Address("198.18.0.21")) == "02:1a:c6:12:00:15"
    lab = layout("magw", parse_topology(grown(1)))
    east = lab.cluster("east")
    gw3 = east.nodes[-1]
    cmds = wiring.node_commands(lab, east, gw3)
    assert cmds[0].startswith("link add eth0 address 02:1a:ac:11:00:0d ")
    assert any(c.startswith("link add wan0 address 02:1a:c6:12:00:0d ") for c in cmds)
    assert not any("veth peer name eth0" in c for c in cmds)  # no pods: no pod veths


def test_one_add_or_remove_at_a_time_and_an_unknown_lab_is_bad_input(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each reads, changes and writes the lab's topology: a second one while the first runs is refused at once."""
    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path)
    st = LabState(name="gl", topology=default_topology(), phase="up", daemons=True, token="2" * 16)
    state.write(st)
    with grow._exclusive("gl", "add-gateway"):
        with pytest.raises(LabError, match="another add-gateway or remove-gateway is running on lab gl"):
            grow.add_gateway("gl", "east")
        with pytest.raises(LabError, match="another add-gateway or remove-gateway is running on lab gl"):
            grow.remove_gateway("gl", "east-gw3")
    with pytest.raises(LabInputError, match="remove-gateway: NODE: 'east-gw1' is not an added gateway"):
        grow.remove_gateway("gl", "east-gw1")  # the lock was released
    with pytest.raises(LabInputError, match="add-gateway: no lab named 'nope'"):
        grow.add_gateway("nope", "east")
    assert state.read("gl") == st
