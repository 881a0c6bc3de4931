"""A small egress-gateway cluster in throwaway namespaces, programmed by our drivers from plan_egressgw.

Three nodes share an underlay bridge (192.168.77.0/24); an outside server (192.168.77.200) sits on it too.
Pods are namespaces behind a veth to their node (host-gw: each node routes the others' /24 via their IP), and
every node has a CNI masquerade table (lab-cni's rule) so the null-SNAT bypass is exercised. VIP A (vrid 100,
shared by namespace ``shop``) and VIP B (vrid 101, exclusive to ``web/api``) have candidates n1 and n3.

    pa  10.9.2.10  n2  shop, app=front  -> VIP A
    pl  10.9.1.10  n1  shop, app=front  -> VIP A (on the first holder)
    pb  10.9.3.10  n3  web/api backend  -> VIP B (port 80 -> 8080, TCP and UDP)
    pu  10.9.2.11  n2  default          unbound
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
import uuid
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import attrs

from magw.desired.egressgw.bindings import resolve
from magw.desired.egressgw.plan import EgressGatewayInputs, EgressGatewayPlan, plan_egressgw
from magw.drivers.netlink.driver import NetlinkDriver
from magw.drivers.nft.driver import NftDriver
from magw.drivers.node import NodeDriver
from magw.model.egressgw import EgressBinding, EgressGateway, EgressVIP
from magw.model.globalnet import Pod, Service, ServicePort
from tests.support.kernel_node import nft_script, sync_once
from tests.support.netns import run

ECHO = str(Path(__file__).with_name("dataplane_echo.py"))
NODES = {"n1": "192.168.77.1", "n2": "192.168.77.2", "n3": "192.168.77.3"}
OUTSIDE = "192.168.77.200"
VIP_A = "192.168.77.100"
VIP_B = "192.168.77.101"
POD_CIDR = IPv4Network("10.9.0.0/16")
SERVICE_CIDR = IPv4Network("10.96.0.0/16")
REMOTE_CIDR = IPv4Network("10.20.0.0/16")
PODS = {  # name: (node, ip, namespace, app)
    "pa": ("n2", "10.9.2.10", "shop", "front"),
    "pl": ("n1", "10.9.1.10", "shop", "front"),
    "pb": ("n3", "10.9.3.10", "web", "api"),
    "pu": ("n2", "10.9.2.11", "default", "other"),
}
BACKEND_PORT = 8080
SERVICE_PORT = 80
OUTSIDE_PORT = 9000
CNI_MASQUERADE = f"""table ip lab-cni {{
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr {POD_CIDR} ip daddr != {{ {POD_CIDR}, {SERVICE_CIDR} }} masquerade
  }}
}}
"""


def egress_model() -> tuple[EgressGateway, tuple[Service, ...], tuple[Pod, ...]]:
    vips = (
        EgressVIP(
            name="a", vip=IPv4Address(VIP_A), vrid=100, candidates=("n1", "n3"), bindings=(EgressBinding("shop"),)
        ),
        EgressVIP(
            name="b", vip=IPv4Address(VIP_B), vrid=101, candidates=("n1", "n3"), bindings=(EgressBinding("web", "api"),)
        ),
    )
    ports = (
        ServicePort(port=SERVICE_PORT, protocol="TCP", target_port=BACKEND_PORT),
        ServicePort(port=SERVICE_PORT, protocol="UDP", target_port=BACKEND_PORT),
    )
    services = (
        Service(namespace="shop", name="front", selector={"app": "front"}, ports=ports),
        Service(namespace="web", name="api", selector={"app": "api"}, ports=ports),
    )
    pods = tuple(
        Pod(namespace=ns, name=name, ip=IPv4Address(ip), labels={"app": app}, node=node)
        for name, (node, ip, ns, app) in PODS.items()
    )
    return EgressGateway(vips=vips), services, pods


def node_plan(node: str) -> EgressGatewayPlan:
    egress, services, pods = egress_model()
    return plan_egressgw(
        EgressGatewayInputs(
            node=node,
            cluster_cidrs=(POD_CIDR, SERVICE_CIDR),
            remote_cidrs=(REMOTE_CIDR,),
            node_ips=tuple(IPv4Address(ip) for ip in NODES.values()),
            egressgw=egress,
            resolution=resolve(egress, services, pods),
            services=services,
            pods=pods,
        )
    )


@attrs.frozen
class World:
    prefix: str

    def ns(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def sync(self, node: str) -> list[str]:
        """One observe/diff/apply of ``node``'s egress plan by the real drivers; the op lines it carried out."""
        with NetlinkDriver(self.ns(node)) as netlink, NftDriver(self.ns(node), (("ip", "magw-egress"),)) as nft:
            synced = sync_once(NodeDriver(netlink=netlink, nft=nft), node_plan(node).state)
        assert [f.describe() for f in synced.result.failed] == []
        return [f"{op.verb} {op.kind}" for op in synced.changes.ops] + [f"nft {c}" for c in synced.changes.nft]

    def move_vip(self, vip: str, old: str, new: str) -> None:
        """What keepalived does: the /32 leaves the old holder, joins the new one, and one GARP tells the L2."""
        run(self.ns(old), "ip", "addr", "del", f"{vip}/32", "dev", "eth0")
        run(self.ns(new), "ip", "addr", "add", f"{vip}/32", "dev", "eth0")
        send_garp(self.ns(new), "eth0", vip)

    def rx(self, node: str) -> int:
        """Packets decapsulated by ``node``'s magw-egress."""
        return int(run(self.ns(node), "cat", "/sys/class/net/magw-egress/statistics/rx_packets").stdout)


GARP = """
import socket, struct, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
mac, ip = s.getsockname()[4], socket.inet_aton(sys.argv[2])
arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + ip + bytes(6) + ip
s.send(b"\\xff" * 6 + mac + struct.pack("!H", 0x0806) + arp)
"""


def send_garp(ns: str, dev: str, ip: str) -> None:
    """One gratuitous ARP request (sender IP = target IP) from ``dev``, through a raw AF_PACKET socket."""
    run(ns, sys.executable, "-c", GARP, dev, ip)


def _pod(w: World, name: str) -> None:
    node, ip, _, _ = PODS[name]
    pns, nns = w.ns(name), w.ns(node)
    subprocess.run(["ip", "netns", "add", pns], check=True, timeout=30)
    run(pns, "ip", "link", "set", "lo", "up")
    run(nns, "ip", "link", "add", f"v{name}", "type", "veth", "peer", "name", "eth0", "netns", pns)
    run(nns, "ip", "addr", "add", "169.254.1.1/32", "dev", f"v{name}")
    run(nns, "ip", "link", "set", f"v{name}", "up")
    run(nns, "ip", "route", "add", f"{ip}/32", "dev", f"v{name}")
    run(pns, "ip", "addr", "add", f"{ip}/32", "dev", "eth0")
    run(pns, "ip", "link", "set", "eth0", "up")
    run(pns, "ip", "route", "add", "169.254.1.1", "dev", "eth0")
    run(pns, "ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")


def _build(w: World) -> None:
    sw = w.ns("sw")
    for short in ("sw", *NODES, "out"):
        subprocess.run(["ip", "netns", "add", w.ns(short)], check=True, timeout=30)
        run(w.ns(short), "ip", "link", "set", "lo", "up")
    run(sw, "ip", "link", "add", "br0", "type", "bridge")
    run(sw, "ip", "link", "set", "br0", "up")
    for short, ip in (*NODES.items(), ("out", OUTSIDE)):
        run(sw, "ip", "link", "add", f"u{short}", "type", "veth", "peer", "name", "eth0", "netns", w.ns(short))
        run(sw, "ip", "link", "set", f"u{short}", "master", "br0", "up")
        run(w.ns(short), "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
        run(w.ns(short), "ip", "link", "set", "eth0", "up")
    for node in NODES:
        run(w.ns(node), "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for other, other_ip in NODES.items():
            if other != node:
                run(w.ns(node), "ip", "route", "add", f"10.9.{other[1]}.0/24", "via", other_ip)
        nft_script(w.ns(node), CNI_MASQUERADE)
    for name in PODS:
        _pod(w, name)


@contextlib.contextmanager
def egress_world() -> Iterator[World]:
    """The cluster, every node synced once, both VIPs on n1; every namespace removed afterwards."""
    w = World(prefix=f"mge{uuid.uuid4().hex[:6]}")
    try:
        _build(w)
        for node in NODES:
            w.sync(node)
        for vip in (VIP_A, VIP_B):
            run(w.ns("n1"), "ip", "addr", "add", f"{vip}/32", "dev", "eth0")
        yield w
    finally:
        for short in ("sw", *NODES, "out", *PODS):
            subprocess.run(["ip", "netns", "del", w.ns(short)], check=False, timeout=30, capture_output=True)


@contextlib.contextmanager
def echo_server(ns: str, proto: str, ip: str, port: int) -> Iterator[None]:
    """A dataplane_echo server (answers with the peer it saw), killed by PID afterwards."""
    args = ["ip", "netns", "exec", ns, sys.executable, ECHO, f"{proto}-server", ip, str(port), "--seconds", "120"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 15)
        assert ready == [proc.stdout], f"{proto} server in {ns} did not start"
        assert proc.stdout.readline().strip() == "ready"
        yield
    finally:
        proc.kill()
        proc.wait(timeout=10)


def seen_by_server(ns: str, proto: str, ip: str, port: int, count: int = 3) -> set[str]:
    """The source addresses the server at ip:port saw for ``count`` flows from ``ns`` (each its own port)."""
    args = ["ip", "netns", "exec", ns, sys.executable, ECHO, f"{proto}-client", ip, str(port), "--count", str(count)]
    out = subprocess.run([*args, "--timeout", "2", "--tries", "3"], capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    assert doc["lost"] == 0, f"{ns} -> {ip}:{port}/{proto}: {doc}"
    return {str(a).rsplit(":", 1)[0] for a in doc["answers"]}
