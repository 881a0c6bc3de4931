"""VXLAN decapsulates whatever reaches its port: our input guards let only known senders in.

A forged VXLAN packet (outer UDP to a gateway's VXLAN port, inner packet from an east pod's address to a west pod)
is built by hand and sent once from a rogue namespace and once from a legitimate sender's namespace. The west pod
listens on the inner destination: it must get the legitimate sender's copy (so the packet is a working injection)
and never the rogue's. Both doors are tried: the inter-cluster VXLAN port (4500) of the west gateway from an
address on the WAN that is no remote gateway, and the cluster VXLAN port (4800) from an address on the west
underlay that is no node of west. The topology and the planning are tests/kernel/test_dataplane.py's.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import uuid
from ipaddress import IPv4Address

import pytest

from magw.desired.node.planner import plan
from magw.model import Strategy
from magw.model.vtep import INTER_PORT, INTER_VNI, INTRA_PORT, INTRA_VNI
from tests.support.dataplane_topology import HOSTS, Topology, build, snapshot
from tests.support.kernel_node import real_node_driver, sync_once
from tests.support.netns import NsFactory, ip_json, run

pytestmark = pytest.mark.kernel

EAST_POD = "10.1.3.10"
WEST_POD = "10.2.3.10"
INNER_PORT = 7001
LISTEN_SECONDS = 4.0

_RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(float(sys.argv[3]))
print("ready", flush=True)
got = []
try:
    while True:
        data, _ = s.recvfrom(2048)
        got.append(data.decode())
except socket.timeout:
    pass
print(" ".join(got), flush=True)
"""

_SENDER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
s.sendto(bytes.fromhex(sys.argv[4]), (sys.argv[2], int(sys.argv[3])))
"""


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _forged_vxlan(vni: int, inner_dst_mac: str, payload: bytes) -> bytes:
    """VXLAN header + Ethernet + IPv4 (EAST_POD -> WEST_POD) + UDP (no checksum, allowed in IPv4) + payload."""
    udp = struct.pack("!HHHH", 40000, INNER_PORT, 8 + len(payload), 0) + payload
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, socket.IPPROTO_UDP, 0,
        IPv4Address(EAST_POD).packed, IPv4Address(WEST_POD).packed,
    )  # fmt: skip
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    ether = bytes.fromhex(inner_dst_mac.replace(":", "")) + bytes.fromhex("020000aabbcc") + b"\x08\x00"
    return struct.pack("!II", 0x08000000, vni << 8) + ether + ip + udp


def _apply_everywhere(top: Topology) -> None:
    for host in HOSTS:
        desired = plan(snapshot(host.cluster, Strategy.RESILIENT), host.name)
        with real_node_driver(top.nodes[host.name]) as driver:
            assert [f.describe() for f in sync_once(driver, desired).result.failed] == []


def _rogue(ns_factory: NsFactory, top: Topology, bridge: str, address: str) -> str:
    """A namespace on one of the switch's bridges, holding ``address``/24: a sender we never heard of."""
    ns = ns_factory("magwt-rogue")
    port = f"r{uuid.uuid4().hex[:8]}"
    run(top.switch, "ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
    run(top.switch, "ip", "link", "set", port, "master", bridge, "up")
    run(ns, "ip", "link", "set", "eth0", "up")
    run(ns, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
    return ns


def _delivered(top: Topology, sends: list[tuple[str, str, str, int, bytes]]) -> list[str]:
    """Send each forged packet (netns, source, destination, port, packet); what the west pod received."""
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", top.pods["w-w1"], sys.executable, "-c", _RECEIVER, WEST_POD, str(INNER_PORT),
         str(LISTEN_SECONDS)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        for ns, source, destination, port, packet in sends:
            run(ns, sys.executable, "-c", _SENDER, source, destination, str(port), packet.hex())
        out, _ = receiver.communicate(timeout=LISTEN_SECONDS + 20)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait(timeout=10)
    return out.split()


def _mac(ns: str, dev: str) -> str:
    return str(ip_json(ns, "link", "show", dev)[0]["address"])


def _rogue_and_legit(
    ns_factory: NsFactory, door: tuple[str, str, int, int], rogue: tuple[str, str], legit: tuple[str, str]
) -> list[str]:
    """Forge one packet for w-gw1's ``door`` (device, address, port, VNI), send it from a rogue namespace on
    ``rogue`` (bridge, address) and from ``legit`` (node, its address): what the west pod received."""
    top = build(ns_factory)
    _apply_everywhere(top)
    dev, address, port, vni = door
    mac = _mac(top.nodes["w-gw1"], dev)
    rogue_ns = _rogue(ns_factory, top, *rogue)
    sends = [
        (rogue_ns, rogue[1], address, port, _forged_vxlan(vni, mac, b"rogue")),
        (top.nodes[legit[0]], legit[1], address, port, _forged_vxlan(vni, mac, b"legit")),
    ]
    return _delivered(top, sends)


def test_forged_inter_cluster_vxlan_enters_only_from_a_remote_gateway(ns_factory: NsFactory) -> None:
    door = ("vxlan-tunnel", "198.51.100.4", INTER_PORT, INTER_VNI)
    assert _rogue_and_legit(ns_factory, door, ("br-wan", "198.51.100.66"), ("e-gw1", "198.51.100.6")) == ["legit"]


def test_forged_cluster_vxlan_enters_only_from_a_node_of_the_cluster(ns_factory: NsFactory) -> None:
    door = ("vx-submariner", "172.19.0.4", INTRA_PORT, INTRA_VNI)
    assert _rogue_and_legit(ns_factory, door, ("br-west", "172.19.0.66"), ("w-w1", "172.19.0.3")) == ["legit"]


def test_control_without_the_guards_the_rogue_gets_in(ns_factory: NsFactory) -> None:
    """Control for the two tests above: with the guard rules flushed, the same rogue packet reaches the pod."""
    top = build(ns_factory)
    _apply_everywhere(top)
    gw = top.nodes["w-gw1"]
    rogue = _rogue(ns_factory, top, "br-wan", "198.51.100.66")
    run(gw, "nft", "flush", "chain", "ip", "magw", "input")
    packet = _forged_vxlan(INTER_VNI, _mac(gw, "vxlan-tunnel"), b"rogue")
    assert _delivered(top, [(rogue, "198.51.100.66", "198.51.100.4", INTER_PORT, packet)]) == ["rogue"]
