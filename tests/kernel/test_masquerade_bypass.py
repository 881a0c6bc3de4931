"""Pod source IPs survive a CNI masquerade: the datapath proof for our null-SNAT rule (kernel tests).

Topology, all in throwaway namespaces::

    client 10.1.0.2 --- veth-in 10.1.0.1 [router] veth-out 10.2.0.1 --- 10.2.0.2 server

The router holds a CNI-like table that masquerades 10.1.0.0/16 leaving by
``veth-out`` (nat postrouting, priority srcnat = 100). The server answers every
UDP datagram and TCP connection with the source address it saw.

- CNI table only: the server sees the router (the masquerade works).
- plus our planned ``ip magw`` table: the server sees the client's own address.
- plus an ``accept`` in a separate nat chain at srcnat - 10: still masqueraded.
  An accept ends only its own chain; netfilter then runs the next nat chain of
  the hook. What stops the later chains is a NAT *binding*: our rule
  ``snat to ip saddr`` binds the connection to its own source at priority 90.
- the gateway's ``ct status dnat`` rule: a remote client reaching a service that
  is DNATed to a local pod is SNATed to the gateway's CNI IP.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
from collections.abc import Callable, Iterator

import attrs
import pytest

from magw.desired.nft.values import NftTable
from magw.drivers.nft import NftDriver
from magw.reconcile.changeset import NftChange
from tests.support.east_west import apply_planned_table, east_west_snapshot
from tests.support.netns import NsFactory, run

pytestmark = pytest.mark.kernel

CLIENT_IP = "10.1.0.2"
ROUTER_IN_IP = "10.1.0.1"
ROUTER_OUT_IP = "10.2.0.1"
SERVER_IP = "10.2.0.2"
SERVICE_IP = "100.1.0.10"
UDP_PORT = 9000
TCP_PORT = 9001

CNI_TABLE = """
table ip cni {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 10.1.0.0/16 oifname "veth-out" masquerade
  }
}
"""

ACCEPT_TABLE = """
table ip accepter {
  chain post {
    type nat hook postrouting priority srcnat - 10; policy accept;
    ip saddr 10.1.0.0/16 ip daddr 10.2.0.0/16 accept
  }
}
"""

KUBE_PROXY_TABLE = f"""
table ip kube {{
  chain pre {{
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr {SERVICE_IP} udp dport 80 dnat to {CLIENT_IP}:{UDP_PORT}
    ip daddr {SERVICE_IP} tcp dport 80 dnat to {CLIENT_IP}:{TCP_PORT}
  }}
}}
"""

# Answers each UDP datagram and TCP connection with the peer address it saw; stops after 60 s at most.
SERVER = f"""
import select, socket, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("0.0.0.0", {UDP_PORT}))
t = socket.socket()
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", {TCP_PORT}))
t.listen(8)
print("ready", flush=True)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    ready, _, _ = select.select([u, t], [], [], 1)
    for s in ready:
        if s is u:
            _, peer = u.recvfrom(64)
            u.sendto(peer[0].encode(), peer)
        else:
            c, peer = t.accept()
            c.settimeout(5)
            c.sendall(peer[0].encode())
            c.close()
"""

# Asks over UDP (3 tries of 2 s) and TCP (5 s); prints {"udp": seen, "tcp": seen}.
CLIENT = """
import json, socket, sys
host, port_udp, port_tcp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
udp = None
for _ in range(3):
    u.sendto(b"who", (host, port_udp))
    try:
        udp = u.recvfrom(64)[0].decode()
        break
    except socket.timeout:
        pass
t = socket.create_connection((host, port_tcp), timeout=5)
t.settimeout(5)
tcp = t.recv(64).decode()
print(json.dumps({"udp": udp, "tcp": tcp}))
"""


@attrs.frozen(kw_only=True)
class Topology:
    client: str
    router: str
    server: str


def _build(make_ns: Callable[[str], str]) -> Topology:
    topo = Topology(client=make_ns("magwt-cli"), router=make_ns("magwt-rtr"), server=make_ns("magwt-srv"))
    r = topo.router
    run(r, "ip", "link", "add", "veth-in", "type", "veth", "peer", "name", "eth0", "netns", topo.client)
    run(r, "ip", "link", "add", "veth-out", "type", "veth", "peer", "name", "eth0", "netns", topo.server)
    for ns, dev, addr, gw in (
        (topo.client, "eth0", f"{CLIENT_IP}/24", ROUTER_IN_IP),
        (topo.server, "eth0", f"{SERVER_IP}/24", ROUTER_OUT_IP),
        (r, "veth-in", f"{ROUTER_IN_IP}/24", None),
        (r, "veth-out", f"{ROUTER_OUT_IP}/24", None),
    ):
        run(ns, "ip", "addr", "add", addr, "dev", dev)
        run(ns, "ip", "link", "set", dev, "up")
        if gw is not None:
            run(ns, "ip", "route", "add", "default", "via", gw)
    run(r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")  # the router namespace's own sysctl
    _nft_text(r, CNI_TABLE)
    return topo


@pytest.fixture
def topo(ns_factory: NsFactory) -> Topology:
    return _build(ns_factory)


def _nft_text(ns: str, text: str) -> None:
    cmd = ["ip", "netns", "exec", ns, "nft", "-f", "-"]
    done = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=30, check=False)
    assert done.stderr == ""


@contextlib.contextmanager
def _server(ns: str) -> Iterator[None]:
    """The echo server in ``ns``, ready when entered, killed (by its PID) on exit."""
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-c", SERVER]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 15)
        assert (bool(ready) and proc.stdout.readline().strip()) == "ready"
        yield
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _seen(topo: Topology, *, reverse: bool = False) -> dict[str, str]:
    """The source address the server saw for one UDP exchange and one TCP connection.

    ``reverse``: the server namespace is the client, asking the service address
    (port 80), which the router's kube-proxy table DNATs to the client namespace.
    """
    client, server = (topo.server, topo.client) if reverse else (topo.client, topo.server)
    target, ports = (SERVICE_IP, ("80", "80")) if reverse else (SERVER_IP, (str(UDP_PORT), str(TCP_PORT)))
    with _server(server):
        out = run(client, sys.executable, "-c", CLIENT, target, *ports).stdout
    seen: dict[str, str] = json.loads(out)
    return seen


def _apply_ours(ns: str, node: str) -> NftTable:
    """East (10.1.0.0/16) with the router as gateway (CNI IP 10.1.0.1) and a worker; west is 10.2.0.0/16."""
    return apply_planned_table(ns, east_west_snapshot("router", ROUTER_IN_IP, "worker", "10.1.3.1"), node)


def test_cni_masquerade_hides_the_client_without_our_table(topo: Topology) -> None:
    """With only the CNI table, the server sees the router's address: the masquerade is real."""
    assert _seen(topo) == {"udp": ROUTER_OUT_IP, "tcp": ROUTER_OUT_IP}


@pytest.mark.parametrize("node", ["router", "worker"], ids=["gateway-table", "worker-table"])
def test_our_table_keeps_the_client_source_ip(topo: Topology, node: str) -> None:
    """With our planned table on the router, the server sees the client's own address, UDP and TCP."""
    _apply_ours(topo.router, node)
    assert _seen(topo) == {"udp": CLIENT_IP, "tcp": CLIENT_IP}


def test_removing_our_table_brings_the_masquerade_back(topo: Topology) -> None:
    """New connections after our table is deleted are masqueraded again (the bypass is ours alone)."""
    _apply_ours(topo.router, "router")
    assert _seen(topo) == {"udp": CLIENT_IP, "tcp": CLIENT_IP}
    with NftDriver(topo.router) as driver:
        assert driver.apply([NftChange(family="ip", name="magw", table=None)]).failed == ()
    assert _seen(topo) == {"udp": ROUTER_OUT_IP, "tcp": ROUTER_OUT_IP}  # new flows: new source ports


def test_an_accept_in_another_table_does_not_stop_the_masquerade(topo: Topology) -> None:
    """``accept`` at srcnat - 10 in a separate table: the CNI chain still runs and masquerades."""
    _nft_text(topo.router, ACCEPT_TABLE)
    assert _seen(topo) == {"udp": ROUTER_OUT_IP, "tcp": ROUTER_OUT_IP}


def test_gateway_snats_dnated_service_traffic_from_remote_clients(topo: Topology) -> None:
    """A remote client's connection to a local service, DNATed here to a pod, reaches it from the gateway's CNI IP.

    Without our table the pod sees the remote client itself (and would answer it
    directly, past the gateway that holds the conntrack state).
    """
    _nft_text(topo.router, KUBE_PROXY_TABLE)
    before = _seen(topo, reverse=True)
    _apply_ours(topo.router, "router")
    after = _seen(topo, reverse=True)
    assert (before, after) == (
        {"udp": SERVER_IP, "tcp": SERVER_IP},
        {"udp": ROUTER_IN_IP, "tcp": ROUTER_IN_IP},
    )
