"""The lab's cable: the topology's ``cable`` key and ``--cable``, what the broker and the daemons are told."""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs
import pytest

from magw.cli import lab as cli_lab
from magw.daemons.gateway import main as gateway
from magw.daemons.route_agent import main as route_agent
from magw.lab.build.state import LabState
from magw.lab.errors import LabInputError
from magw.lab.observe.status import status_text
from magw.lab.planes.daemons import broker_documents, gateway_argv, route_agent_argv
from magw.lab.spec import naming
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import default_topology, parse_topology
from magw.model.cable import Cable

TWO = {"clusters": [{"id": "east"}, {"id": "west"}]}


def test_the_topology_says_its_cable_and_round_trips() -> None:
    topo = parse_topology({**TWO, "cable": "wireguard"}, source="t.yaml")
    assert topo.cable is Cable.WIREGUARD
    assert topo.to_doc()["cable"] == "wireguard"
    assert parse_topology(topo.to_doc(), source="again") == topo
    assert parse_topology(TWO, source="t.yaml").cable is Cable.VXLAN
    assert "cable" not in parse_topology(TWO, source="t.yaml").to_doc()  # the default stays out


def test_an_unknown_cable_is_one_line_naming_the_key() -> None:
    with pytest.raises(LabInputError) as err:
        parse_topology({**TWO, "cable": "ipsec"}, source="t.yaml")
    assert str(err.value) == "t.yaml: cable: 'ipsec' is not one of vxlan, wireguard"


def test_the_broker_config_carries_the_cable_only_when_it_is_wireguard() -> None:
    plain = broker_documents(layout("lc", default_topology()))["config.yaml"]
    assert "cable" not in plain
    wg = broker_documents(layout("lc", attrs.evolve(default_topology(), cable=Cable.WIREGUARD)))["config.yaml"]
    assert wg["cable"] == "wireguard"


def test_both_daemons_of_a_node_share_its_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path)
    monkeypatch.setattr("magw.lab.planes.daemons.script", lambda name: Path("/bin") / name)
    topo = attrs.evolve(default_topology(), cable=Cable.WIREGUARD)
    st = LabState(name="lc", topology=topo, phase="up", daemons=True, token="0" * 16)
    gw = layout("lc", topo).node("east-gw1")
    agent = route_agent.build_parser().parse_args(route_agent_argv(st, gw)[1:])
    publisher = gateway.build_parser().parse_args(gateway_argv(st, gw)[1:])
    assert agent.state_dir == publisher.state_dir == str(tmp_path / "lc" / "state" / "east-gw1")
    assert agent.wireguard_backend == "auto"
    # wireguard-go: room for the probes (a stall of about 0.45 s passes)
    assert (agent.probe_timeout, agent.probe_fast_interval, agent.down_after) == (0.04, 0.05, 8)
    plain = LabState(name="lc", topology=default_topology(), phase="up", daemons=True, token="0" * 16)
    argv = route_agent_argv(plain, layout("lc", default_topology()).node("east-gw1"))
    assert "--probe-timeout" not in argv
    plain_agent = route_agent.build_parser().parse_args(argv[1:])
    assert (plain_agent.probe_timeout, plain_agent.down_after) == (0.02, 3)


def test_the_cable_flag_wins_over_the_topology() -> None:
    topo = parse_topology({**TWO, "cable": "wireguard"}, source="t.yaml")
    assert cli_lab._with_cable(argparse.Namespace(cable="vxlan"), topo).cable is Cable.VXLAN
    assert cli_lab._with_cable(argparse.Namespace(cable=None), topo).cable is Cable.WIREGUARD
    plain = parse_topology(TWO, source="t.yaml")
    assert cli_lab._with_cable(argparse.Namespace(cable="wireguard"), plain).cable is Cable.WIREGUARD


def test_status_names_the_cable() -> None:
    doc = {"name": "lc", "phase": "up", "strategy": "resilient", "multi_active": True, "cable": "wireguard",
           "namespaces": {"present": 3, "expected": 3}, "clusters": [], "daemons": [], "servers": [],
           "control_plane": {"kind": "file", "broker_dir": "/b"}}  # fmt: skip
    assert status_text(doc).splitlines()[0] == (
        "lab lc: up, strategy resilient, multi-active, cable wireguard, namespaces 3/3"
    )
