"""The NAT-sync world: two VIP candidates, a worker with a pod, an outside host, on one underlay bridge.

    n1 172.31.0.1, n2 172.31.0.2   VIP candidates (keepalived, conntrackd, the same nft rules on both)
    n3 172.31.0.3                   worker; pod 10.1.3.10 behind it (veth, 10.1.3.1)
    n4 172.31.0.4                   "outside": 203.0.113.10 on lo (the server of egress, the client of ingress)

Steering is minimal and ours (helper B builds the real planner): the worker routes 203.0.113.0/24 via the
VIP, so its ARP entry for the VIP decides which candidate receives (the GARP moves it); outside routes
the pod CIDR via the VIP. The candidates SNAT the pod to the VIP at postrouting priority 90 and DNAT
VIP:80 to pod:8080 (marked 0x2, never SNATed).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import Iterator

import attrs

from magw.drivers.netns import in_netns
from tests.support.egress_ha_net import VIP, Underlay, build
from tests.support.netns import netns, nft_json, run

POD = "10.1.3.10"
OUTSIDE = "203.0.113.10"
EGRESSGW_PORT = 9000
INGRESS_PORT = 80
BACKEND_PORT = 8080
TIMEOUT = 5.0

RULES = f"""
table ip magwtest {{
  chain pre {{
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr {VIP} tcp dport {INGRESS_PORT} meta mark set meta mark & 0xfffffffd | 0x2 dnat to {POD}:{BACKEND_PORT}
  }}
  chain post {{
    type nat hook postrouting priority 90; policy accept;
    meta mark & 0x2 == 0x2 accept
    ip saddr 10.1.3.0/24 ip daddr != 10.1.0.0/16 snat to {VIP}
  }}
}}
"""

# The commit guard, as the planner writes it (magw.desired.egressgw.nftables.commit_guard_rules, where the
# second rule matches ``iifname "magw-egress"``: this world has no tunnel, so the pod CIDR stands in for it).
# A TCP segment that is not a SYN and would start a new conntrack entry, for the VIP or from a pod, is dropped:
# not answered with RST by the node's own stack, not picked up and NATed on its own. The sender retransmits,
# and after conntrackd's commit the retransmission matches the synced entry. The counters let a test know such
# a segment has arrived (with or without the drop).
GUARD = """
table ip magwguard {{
  chain prerouting-guard {{
    type filter hook prerouting priority -150; policy accept;
    ip daddr {vip} tcp flags & (syn | ack) != syn ct state new counter {verdict}
    ip saddr 10.1.3.0/24 tcp flags & (syn | ack) != syn ct state new counter {verdict}
  }}
}}
"""


@attrs.frozen
class NatWorld:
    net: Underlay
    pod: str

    @property
    def outside(self) -> str:
        return self.net.nodes[3]


def _sysctl(ns: str, *settings: str) -> None:
    run(ns, "sysctl", "-q", "-w", *settings)


def build_world(stack: contextlib.ExitStack) -> NatWorld:
    net = build(stack, 4, prefix="magwnat")
    n1, n2, n3, out = net.nodes
    pod = stack.enter_context(netns("magwnatpod"))
    run(n3, "ip", "link", "add", "vpod", "type", "veth", "peer", "name", "eth0", "netns", pod)
    run(pod, "ip", "addr", "add", f"{POD}/24", "dev", "eth0")
    run(pod, "ip", "link", "set", "eth0", "up")
    run(pod, "ip", "route", "add", "default", "via", "10.1.3.1")
    run(n3, "ip", "addr", "add", "10.1.3.1/24", "dev", "vpod")
    run(n3, "ip", "link", "set", "vpod", "up")
    run(n3, "ip", "route", "add", "203.0.113.0/24", "via", str(VIP), "dev", "eth0")
    run(out, "ip", "addr", "add", f"{OUTSIDE}/32", "dev", "lo")
    run(out, "ip", "route", "add", "10.1.0.0/16", "via", str(VIP), "dev", "eth0")
    for ns in (n1, n2, n3):
        _sysctl(ns, "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0")
    for ns in (n1, n2):
        run(ns, "ip", "route", "add", "10.1.3.0/24", "via", str(net.ip(3)))
        run(ns, "ip", "route", "add", "203.0.113.0/24", "via", str(net.ip(4)))
        _nft(ns, RULES)
    return NatWorld(net=net, pod=pod)


def add_guard(world: NatWorld, drop: bool) -> None:
    """The guard table on both candidates: count such segments, and drop them if ``drop``."""
    for ns in world.net.nodes[:2]:
        _nft(ns, GUARD.format(vip=VIP, verdict="drop" if drop else ""))


def guarded(ns: str) -> int:
    """How many segments the guard rule of ``ns`` has seen (read from the kernel)."""
    rules = [o["rule"] for o in nft_json(ns, "list", "table", "ip", "magwguard")["nftables"] if "rule" in o]
    return sum(e["counter"]["packets"] for r in rules for e in r["expr"] if "counter" in e)


def _nft(ns: str, script: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=script, text=True, check=True, timeout=30)


@attrs.define
class Flow:
    """One established TCP connection: the client's and the server's sockets (made in their namespaces)."""

    client: socket.socket
    server: socket.socket
    seen_from: tuple[str, int]

    def close(self) -> None:
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.close()


def _listen(ns: str, addr: str, port: int) -> socket.socket:
    with in_netns(ns):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        s.listen()
    s.settimeout(TIMEOUT)
    return s


def _connect(ns: str, addr: str, port: int, source: str | None = None) -> socket.socket:
    with in_netns(ns):
        s = socket.create_connection((addr, port), timeout=TIMEOUT, source_address=(source, 0) if source else None)
    return s


@contextlib.contextmanager
def flow(world: NatWorld, kind: str) -> Iterator[Flow]:
    """An established connection: ``egress`` pod -> outside:9000, ``ingress`` outside -> VIP:80 -> pod:8080."""
    if kind == "egress":
        lsock = _listen(world.outside, OUTSIDE, EGRESSGW_PORT)
        client = _connect(world.pod, OUTSIDE, EGRESSGW_PORT)
    else:
        lsock = _listen(world.pod, POD, BACKEND_PORT)
        client = _connect(world.outside, str(VIP), INGRESS_PORT, source=OUTSIDE)
    try:
        server, peer = lsock.accept()
    finally:
        lsock.close()
    server.settimeout(TIMEOUT)
    client.settimeout(TIMEOUT)
    f = Flow(client=client, server=server, seen_from=peer)
    try:
        yield f
    finally:
        f.close()


def exchange(a: socket.socket, b: socket.socket, payload: bytes) -> str:
    """Send ``payload`` a -> b: "ok" if b reads it whole, else what happened to a or b (reset, timeout, ...)."""
    try:
        a.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = b.recv(len(payload) - len(got))
            if not chunk:
                return "closed"
            got += chunk
    except ConnectionResetError:
        return "reset"
    except TimeoutError:
        return "timeout"
    except OSError as e:
        return f"error {e.errno}"
    return "ok" if got == payload else "corrupt"
