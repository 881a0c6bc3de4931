"""A gateway reached on a port of its own at its public IP (a load balancer's port for it, docs/load-balancer.md,
design B): ``backend_config.publicPort`` in its Endpoint. Its peers' FDB entry on ``vxlan-tunnel`` carries the port
(VXLAN cable) or their WireGuard peer endpoint does (WireGuard cable); without a public IP or a port, nothing
changes. The snapshot parses and dumps the field; the gateway daemon publishes it from its flag or Node document."""

from __future__ import annotations

from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import attrs
import pytest

from magw.daemons.gateway.app import desired_endpoint
from magw.daemons.gateway.main import build_parser
from magw.desired.node.planner import plan
from magw.model import Endpoint, Snapshot
from magw.model.cable import Cable
from magw.snapshot.load import SnapshotError, load_snapshot, parse_snapshot, snapshot_to_doc
from magw.sources.file.broker import FileBroker
from magw.sources.file.documents import DocumentError, to_document
from tests.support.filebroker_world import populate
from tests.support.paths import EXAMPLES

SEED = load_snapshot(EXAMPLES / "seed-east.yaml")  # w-gw1 198.51.100.4, w-gw2 198.51.100.9 (public IPs)


def _with_ports(snapshot: Snapshot, ports: dict[str, int | None], **extra: Any) -> Snapshot:
    endpoints = tuple(
        attrs.evolve(e, public_port=ports[e.hostname], **extra) if e.hostname in ports else e
        for e in snapshot.endpoints
    )
    return attrs.evolve(snapshot, endpoints=endpoints)


def _tunnel_fdb(snapshot: Snapshot) -> dict[str, tuple[str, int | None]]:
    return {f.mac: (str(f.dst), f.port) for f in plan(snapshot, "e-gw1").fdb if f.dev == "vxlan-tunnel"}


def test_a_remote_gateway_behind_a_load_balancer_gets_its_port_in_the_fdb() -> None:
    fdb = _tunnel_fdb(_with_ports(SEED, {"w-gw1": 30001}))
    # VTEP MACs: 02:53 + the 241/8 VTEP of the private IP (172.18.0.4 -> 241.18.0.4)
    assert fdb == {
        "02:53:f1:12:00:04": ("198.51.100.4", 30001),
        "02:53:f1:12:00:09": ("198.51.100.9", None),
    }


def test_the_devices_own_port_is_planned_as_none() -> None:
    """The kernel reads an FDB port equal to the device's (4500) back as none: planned so, a second diff is empty."""
    assert _tunnel_fdb(_with_ports(SEED, {"w-gw1": 4500}))["02:53:f1:12:00:04"] == ("198.51.100.4", None)


def test_a_port_without_a_public_ip_is_not_used() -> None:
    fdb = _tunnel_fdb(_with_ports(SEED, {"w-gw1": 30001}, public_ip=None))
    assert fdb["02:53:f1:12:00:04"] == ("172.18.0.4", None)


def test_a_workers_fdb_never_carries_a_port() -> None:
    state = plan(_with_ports(SEED, {"e-gw1": 30001, "e-gw2": 30002}), "e-w1")
    assert {f.port for f in state.fdb} == {None}


def test_wireguard_peers_use_the_public_port() -> None:
    key = "A" * 42 + "A="
    endpoints = tuple(
        attrs.evolve(e, backend=Cable.WIREGUARD, public_key=key[:-3] + chr(ord("A") + i) + "A=")
        for i, e in enumerate(SEED.endpoints)
    )
    snapshot = attrs.evolve(SEED, endpoints=endpoints, config=attrs.evolve(SEED.config, cable=Cable.WIREGUARD))
    cable = plan(_with_ports(snapshot, {"w-gw1": 30001}), "e-gw1").cable
    assert cable is not None
    assert {p.owner: (str(p.endpoint), p.port) for p in cable.peers} == {
        "west/w-gw1": ("198.51.100.4", 30001),
        "west/w-gw2": ("198.51.100.9", 51820),
    }
    assert {f.port for f in plan(_with_ports(snapshot, {"w-gw1": 30001}), "e-gw1").fdb} == {None}  # inside magw-wg


def test_the_snapshot_reads_publicport_as_string_or_integer_and_dumps_a_string() -> None:
    doc = snapshot_to_doc(_with_ports(SEED, {"w-gw1": 30001}))
    (w_gw1,) = [e for e in doc["endpoints"] if e["hostname"] == "w-gw1"]  # type: ignore[union-attr]
    assert w_gw1["backend_config"] == {"publicPort": "30001"}  # Submariner's backend_config holds strings
    assert parse_snapshot(doc) == _with_ports(SEED, {"w-gw1": 30001})
    w_gw1["backend_config"] = {"publicPort": 30001}
    assert parse_snapshot(doc) == _with_ports(SEED, {"w-gw1": 30001})


@pytest.mark.parametrize("bad", ["0", "65536", "030", "4o0", "", -1, True, 1.5])
def test_a_bad_publicport_is_one_line_naming_it(bad: object) -> None:
    doc = snapshot_to_doc(SEED)
    doc["endpoints"][2]["backend_config"] = {"publicPort": bad}  # type: ignore[index]
    with pytest.raises(SnapshotError, match=r"endpoints\[2\]\.backend_config\.publicPort") as err:
        parse_snapshot(doc)
    assert "\n" not in str(err.value)


def test_the_gateway_publishes_its_port_from_the_flag_or_its_node_document(tmp_path: Path) -> None:
    directory = tmp_path / "broker"
    directory.mkdir()
    populate(directory)  # east: gateway e-gw1 (172.18.0.6), worker e-w1; west: w-gw1
    source = FileBroker(directory, local_cluster="east")
    source.scan()
    want = desired_endpoint(source, "e-gw1", None, IPv4Address("203.0.113.6"), None, 30006)
    assert isinstance(want, Endpoint) and want.public_port == 30006
    plain = desired_endpoint(source, "e-gw1", None, None)
    assert isinstance(plain, Endpoint) and plain.public_port is None
    node = directory / "node-e-gw1.yaml"
    node.write_text("{kind: Node, cluster: east, name: e-gw1, ip: 172.18.0.6, cni_ip: 10.1.1.1, gateway: true, "
                    "public_ip: 203.0.113.6, public_port: 30016}\n")  # fmt: skip
    source.scan()
    from_doc = desired_endpoint(source, "e-gw1", None, None)
    assert isinstance(from_doc, Endpoint)
    assert (str(from_doc.public_ip), from_doc.public_port) == ("203.0.113.6", 30016)
    assert build_parser().parse_args(["--cluster", "east", "--node", "e-gw1", "--broker-dir", str(directory),
                                      "--public-port", "30006"]).public_port == 30006  # fmt: skip


@pytest.mark.parametrize("bad", [0, 70000, "30006", True])
def test_a_node_documents_bad_public_port_is_refused(bad: object) -> None:
    raw = {"kind": "Node", "cluster": "east", "name": "e-gw1", "ip": "172.18.0.6", "cni_ip": "10.1.1.1",
           "public_port": bad}  # fmt: skip
    with pytest.raises(DocumentError, match="public_port"):
        to_document(raw, file="node-e-gw1.yaml", index=0)


def _nft_set(state: Any, name: str) -> set[str]:
    (found,) = [s for s in state.nft.sets if s.name == name]
    return set(found.elements)


def test_a_private_path_found_by_nat_discovery_takes_the_cable_there_and_keeps_both_addresses_admitted() -> None:
    """``Endpoint.private_path`` (this node's NAT discovery, magw.health.natdisc): the FDB entry names the private
    address and the cable's own port; the VXLAN guard still admits the public address (the remote side may not
    have found the path yet)."""
    found = _with_ports(SEED, {"w-gw1": 30001}, private_path=True)
    assert _tunnel_fdb(found)["02:53:f1:12:00:04"] == ("172.18.0.4", None)
    peers = _nft_set(plan(found, "e-gw1"), "vxlan_peers")
    assert {"172.18.0.4", "198.51.100.4"} <= peers


def test_wireguard_peers_on_a_private_path_admit_both_addresses() -> None:
    key = "A" * 42 + "A="
    endpoints = tuple(
        attrs.evolve(e, backend=Cable.WIREGUARD, public_key=key[:-3] + chr(ord("A") + i) + "A=",
                     private_path=e.hostname == "w-gw1")
        for i, e in enumerate(SEED.endpoints)
    )  # fmt: skip
    snapshot = attrs.evolve(SEED, endpoints=endpoints, config=attrs.evolve(SEED.config, cable=Cable.WIREGUARD))
    state = plan(snapshot, "e-gw1")
    assert state.cable is not None
    assert {p.owner: (str(p.endpoint), p.port) for p in state.cable.peers}["west/w-gw1"] == ("172.18.0.4", 51820)
    assert {"172.18.0.4", "198.51.100.4", "198.51.100.9"} == _nft_set(state, "wg_peers")


def test_a_nat_source_address_is_published_loaded_and_admitted_by_both_guards() -> None:
    """``backend_config.natSourceIP``: the address a NAT beside the load balancer gives a gateway's cable packets.
    It round-trips through the snapshot, and the far side's VXLAN and WireGuard guards admit it (nothing is sent
    to it: the FDB still names the public address)."""
    nat = IPv4Address("203.0.113.50")
    snapshot = _with_ports(SEED, {"w-gw1": 30001}, nat_source_ip=nat)
    doc = snapshot_to_doc(snapshot)
    (w_gw1,) = [e for e in doc["endpoints"] if e["hostname"] == "w-gw1"]  # type: ignore[union-attr]
    assert w_gw1["backend_config"] == {"publicPort": "30001", "natSourceIP": "203.0.113.50"}
    assert parse_snapshot(doc) == snapshot
    state = plan(snapshot, "e-gw1")
    assert "203.0.113.50" in _nft_set(state, "vxlan_peers")
    assert _tunnel_fdb(snapshot)["02:53:f1:12:00:04"] == ("198.51.100.4", 30001)
    assert "203.0.113.50" not in _nft_set(plan(SEED, "e-gw1"), "vxlan_peers")
    w_gw1["backend_config"] = {"natSourceIP": "not-an-ip"}
    with pytest.raises(SnapshotError, match=r"backend_config\.natSourceIP"):
        parse_snapshot(doc)


def test_the_gateway_publishes_its_nat_source_from_the_flag() -> None:
    args = build_parser().parse_args(
        ["--broker-dir", "/tmp", "--node", "e-gw1", "--cluster", "east", "--nat-source-ip", "203.0.113.50"]
    )
    assert args.nat_source_ip == IPv4Address("203.0.113.50")
