"""A Service's reply whose DNAT state is on another node must not poison a gateway's conntrack (kernel tests).

The soak's ``gateway-remove`` fault found it (docs/robustness.md): a node that stops being a gateway still holds
kube-proxy's DNAT state for its remote clients' flows. Replies to their last requests, undone by that state,
leave it with the Service's ClusterIP as their source and now route through another gateway, over
``vx-submariner``. There they opened a conntrack entry in the reply's direction; when the flow's requests moved
to that gateway too, they matched the entry as its replies, skipped the DNAT and went nowhere, for as long as
the flow kept sending. Topology, in throwaway namespaces::

                       +--- vxlan-tunnel [gw]  vx-submariner ---+
    client 10.2.0.2 ---+                                        +--- [old] --- pod 10.1.5.2
                       +----------------------------------------+

``old`` (the demoted gateway) and ``gw`` both DNAT the Service 100.1.0.10:80 to the pod (kube-proxy), and ``old``
routes the remote cluster through ``gw``. The client asks once through ``old`` (the request in flight at the
removal), then through ``gw`` (its flow moved), from the same source port.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import attrs
import pytest

from tests.support.east_west import apply_planned_table, east_west_snapshot
from tests.support.egress_world import echo_server
from tests.support.netns import NsFactory, run

pytestmark = pytest.mark.kernel

CLIENT_IP, POD_IP, SERVICE_IP = "10.2.0.2", "10.1.5.2", "100.1.0.10"
GW_TUNNEL, CLIENT_TO_GW = "10.9.1.1", "10.9.1.2"
OLD_WAN, CLIENT_TO_OLD = "10.9.2.1", "10.9.2.2"
GW_VX, OLD_VX = "10.9.3.1", "10.9.3.2"
POD_PORT, CLIENT_PORT = 9000, 41000

KUBE_PROXY = f"""
table ip kube {{
  chain pre {{
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr {SERVICE_IP} udp dport 80 dnat to {POD_IP}:{POD_PORT}
  }}
}}
"""

# One request from CLIENT_IP:CLIENT_PORT to the Service, 2 tries of 1 s; prints the answer or null.
CLIENT = f"""
import json, socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
u.bind(("{CLIENT_IP}", {CLIENT_PORT}))
u.settimeout(1)
got = None
for _ in range(2):
    u.sendto(b"who", ("{SERVICE_IP}", 80))
    try:
        got = u.recvfrom(64)[0].decode()
        break
    except (socket.timeout, ConnectionRefusedError):
        pass
print(json.dumps(got))
"""


@attrs.frozen(kw_only=True)
class Topology:
    client: str
    gw: str
    old: str
    pod: str


def _link(ns: str, dev: str, peer_ns: str, peer: str, addr: str, peer_addr: str) -> None:
    run(ns, "ip", "link", "add", dev, "type", "veth", "peer", "name", peer, "netns", peer_ns)
    for where, name, a in ((ns, dev, addr), (peer_ns, peer, peer_addr)):
        run(where, "ip", "addr", "add", f"{a}/24", "dev", name)
        run(where, "ip", "link", "set", name, "up")


def _build(make_ns: Callable[[str], str]) -> Topology:
    t = Topology(client=make_ns("magwt-ocl"), gw=make_ns("magwt-ogw"), old=make_ns("magwt-old"),
                 pod=make_ns("magwt-opd"))  # fmt: skip
    _link(t.gw, "vxlan-tunnel", t.client, "to-gw", GW_TUNNEL, CLIENT_TO_GW)
    _link(t.old, "wan", t.client, "to-old", OLD_WAN, CLIENT_TO_OLD)
    _link(t.gw, "vx-submariner", t.old, "vx-submariner", GW_VX, OLD_VX)
    _link(t.old, "veth-pod", t.pod, "eth0", "10.1.5.1", POD_IP)
    run(t.client, "ip", "addr", "add", f"{CLIENT_IP}/32", "dev", "lo")
    run(t.client, "ip", "link", "set", "lo", "up")
    run(t.client, "ip", "route", "add", SERVICE_IP, "via", OLD_WAN)  # phase 1: the flow enters by ``old``
    run(t.pod, "ip", "route", "add", "default", "via", "10.1.5.1")
    run(t.gw, "ip", "route", "add", CLIENT_IP, "via", CLIENT_TO_GW)
    run(t.gw, "ip", "route", "add", "10.1.5.0/24", "via", OLD_VX)
    run(t.old, "ip", "route", "add", CLIENT_IP, "via", GW_VX)  # no longer a gateway: remote traffic goes via gw
    for ns in (t.gw, t.old):
        run(ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")  # the namespace's own sysctl
        done = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=KUBE_PROXY,
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    return t


@pytest.fixture
def topo(ns_factory: NsFactory) -> Topology:
    return _build(ns_factory)


def _apply_ours(ns: str) -> None:
    """``gw``'s planned table: east's gateway, its CNI IP its vx-submariner address (the SNAT of a DNATed remote
    client's request); ``old`` is east's worker."""
    apply_planned_table(ns, east_west_snapshot("gw", GW_VX, "old", OLD_VX), "gw")


def _ask(t: Topology) -> str | None:
    """The source address the pod saw for one request, None without an answer."""
    answer: str | None = json.loads(run(t.client, sys.executable, "-c", CLIENT).stdout)
    return None if answer is None else answer.rsplit(":", 1)[0]


def _entries_from_the_service(ns: str) -> list[str]:
    """conntrack's entries in ``ns`` whose original direction starts at the Service (``conntrack`` reads them)."""
    out = run(ns, "conntrack", "-L", "-p", "udp", "--orig-src", SERVICE_IP, check=False).stdout
    return [line for line in out.splitlines() if line.strip()]


def _request_moves_to_gw(t: Topology) -> tuple[str | None, str | None]:
    """The answers to one request through ``old`` and then, from the same source port, one through ``gw``."""
    with echo_server(t.pod, "udp", "0.0.0.0", POD_PORT):
        first = _ask(t)
        run(t.client, "ip", "route", "replace", SERVICE_IP, "via", GW_TUNNEL)
        return first, _ask(t)


def test_without_the_guard_the_orphan_reply_darkens_the_moved_flow(topo: Topology) -> None:
    """The failure, shown on the kernel: the reply through ``gw`` opens an entry from the Service there, and the
    flow's request through ``gw`` then gets no answer (no DNAT)."""
    first, moved = _request_moves_to_gw(topo)
    assert (first, moved) == (CLIENT_IP, None)
    assert len(_entries_from_the_service(topo.gw)) == 1


def test_the_gateway_drops_the_orphan_reply_and_the_moved_flow_is_answered(topo: Topology) -> None:
    """With the gateway's planned table: the orphan reply is dropped (the request in flight is lost, as it would
    be by any failover), it opens nothing, and the moved flow is DNATed and answered at its first request (the
    pod sees ``gw``'s SNAT: keep_client_ip is off in this snapshot)."""
    _apply_ours(topo.gw)
    first, moved = _request_moves_to_gw(topo)
    assert (first, moved) == (None, GW_VX)
    assert _entries_from_the_service(topo.gw) == []
