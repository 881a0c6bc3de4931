"""The OVN node plan in a real kernel: a worker's table 150, and a gateway whose table 149 hands what arrives from
a remote cluster to OVN through ``ovn-k8s-sub0`` on a real ``br-submariner`` (ovs-vswitchd, userspace datapath).

The gateway test carries real traffic: a "remote gateway" namespace sends a UDP packet over a real VXLAN tunnel
(VNI 1000, port 4500) to the gateway; a namespace standing in for OVN's ``submariner_up_lrp`` (169.254.254.9,
attached to br-submariner by a veth) must receive it with the remote pod's source address. Oracles: ``ip route
get`` and what the receiving socket got, never the driver's read-back alone.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from ipaddress import IPv4Address

import pytest

from magw.desired.node.planner import plan
from magw.drivers.ovs.bridge import OvsBridge
from tests.support.kernel_node import add_cni_device, real_node_driver, sync_once
from tests.support.netns import ip_json, netns, run
from tests.support.ovn_node_world import snapshot
from tests.support.ovs_fixture import Ovs, ovs_in_netns, ovs_missing

pytestmark = pytest.mark.kernel

PORT = 9999


def route_get(ns: str, *args: str) -> dict[str, object]:
    (route,) = ip_json(ns, "route", "get", *args)
    return dict(route)


def test_worker_host_traffic_to_remote_clusters_goes_into_ovn_by_table_150() -> None:
    with netns("magwt-ovnw") as ns, real_node_driver(ns) as driver:
        add_cni_device(ns, "10.1.3.2", name="ovn-k8s-mp0")  # OVN-K's management port, the node's cni_ip
        desired = plan(snapshot(), "e-w1")
        synced = sync_once(driver, desired)
        assert [f.describe() for f in synced.result.failed] == []
        assert driver.observe() == desired
        got = route_get(ns, "10.2.0.9")
        assert (got["gateway"], got["dev"], got["prefsrc"], got.get("table")) == (
            "10.1.3.1",
            "ovn-k8s-mp0",
            "10.1.3.2",
            "150",
        )
        run(ns, "ip", "route", "add", "default", "dev", "ovn-k8s-mp0")  # the host's own default route
        other = route_get(ns, "192.0.2.1")
        assert other.get("table") in (None, "main")  # only remote CIDRs are steered into OVN
        assert [r["priority"] for r in ip_json(ns, "rule", "show") if r.get("table") == "150"] == [150]


@pytest.fixture
def gateway() -> Iterator[tuple[str, Ovs]]:
    missing = ovs_missing()
    if missing:
        pytest.skip(missing)
    with netns("magwt-ovngw") as gw, ovs_in_netns(gw) as ovs:
        yield gw, ovs


def _link(ns: str, name: str, peer_ns: str, peer: str) -> None:
    run(ns, "ip", "link", "add", name, "type", "veth", "peer", "name", peer, "netns", peer_ns)
    run(ns, "ip", "link", "set", name, "up")
    run(peer_ns, "ip", "link", "set", peer, "up")


def _mac(ns: str, dev: str) -> str:
    (link,) = ip_json(ns, "link", "show", dev)
    return str(link["address"])


def _remote_gateway(remote: str, gw: str) -> None:
    """west's gateway w-gw1 (underlay 172.19.0.4): a VXLAN tunnel to east's e-gw1 (172.18.0.6) and a pod."""
    gw_mac = _mac(gw, "vxlan-tunnel")
    for cmd in (
        ("ip", "link", "add", "vxlan-tunnel", "type", "vxlan", "id", "1000", "dstport", "4500", "local",
         "172.19.0.4", "nolearning"),
        ("ip", "addr", "add", "241.19.0.4/8", "dev", "vxlan-tunnel"),
        ("ip", "link", "set", "vxlan-tunnel", "up"),
        ("ip", "neigh", "replace", "241.18.0.6", "lladdr", gw_mac, "dev", "vxlan-tunnel", "nud", "permanent"),
        ("bridge", "fdb", "replace", gw_mac, "dev", "vxlan-tunnel", "dst", "172.18.0.6", "self", "permanent"),
        ("ip", "addr", "add", "10.2.0.7/32", "dev", "lo"),
        ("ip", "route", "add", "10.1.0.0/16", "via", "241.18.0.6", "dev", "vxlan-tunnel", "src", "10.2.0.7"),
    ):  # fmt: skip
        run(remote, *cmd)


def test_gateway_hands_remote_traffic_to_ovn_through_ovn_k8s_sub0(gateway: tuple[str, Ovs]) -> None:
    gw, ovs = gateway
    OvsBridge(ovs.db).ensure()
    run(gw, sys.executable, "-c", "from magw.drivers.ovs.link import link_up; link_up('ovn-k8s-sub0')")
    run(gw, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    add_cni_device(gw, "10.1.1.2", name="ovn-k8s-mp0")
    with netns("magwt-ovnrem") as remote, netns("magwt-ovnlrp") as lrp, real_node_driver(gw) as driver:
        _link(gw, "wan0", remote, "wan0")
        run(gw, "ip", "addr", "add", "172.18.0.6/12", "dev", "wan0")
        run(remote, "ip", "addr", "add", "172.19.0.4/12", "dev", "wan0")
        desired = plan(snapshot(), "e-gw1")
        synced = sync_once(driver, desired)
        assert [f.describe() for f in synced.result.failed] == []
        assert driver.observe() == desired
        _remote_gateway(remote, gw)
        # submariner_up_lrp's stand-in: a veth on br-submariner, 169.254.254.9, owning the pod's address.
        _link(gw, "uplrp0", lrp, "uplrp0")
        ovs.vsctl("add-port", "br-submariner", "uplrp0")
        run(lrp, "ip", "addr", "add", "169.254.254.9/29", "dev", "uplrp0")
        run(lrp, "ip", "addr", "add", "10.1.5.5/32", "dev", "lo")
        run(lrp, "ip", "route", "add", "10.2.0.0/16", "via", "169.254.254.10")

        got = route_get(gw, "10.1.5.5", "from", "10.2.0.7", "iif", "vxlan-tunnel")
        assert (got["gateway"], got["dev"], got.get("table")) == ("169.254.254.9", "ovn-k8s-sub0", "149")
        # OVN-K's own route to the cluster CIDR (main table) serves everything that is not from a remote cluster.
        run(gw, "ip", "route", "add", "10.1.0.0/16", "via", "10.1.1.1", "dev", "ovn-k8s-mp0")
        local = route_get(gw, "10.1.5.5")
        assert (local["dev"], local.get("table")) == ("ovn-k8s-mp0", None)
        assert route_get(gw, "10.1.5.5", "from", "10.2.0.7", "iif", "vxlan-tunnel")["dev"] == "ovn-k8s-sub0"

        listener = subprocess.Popen(
            ["ip", "netns", "exec", lrp, sys.executable, "-c",
             "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
             f"s.bind(('10.1.5.5', {PORT})); s.settimeout(15); data, peer = s.recvfrom(100); "
             "print(data.decode(), peer[0])"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            sender = (
                "import socket, time; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                "s.bind(('10.2.0.7', 0))\n"
                f"for _ in range(40): s.sendto(b'hello', ('10.1.5.5', {PORT})); time.sleep(0.25)"
            )
            deadline = time.monotonic() + 20
            sent = subprocess.Popen(["ip", "netns", "exec", remote, sys.executable, "-c", sender])
            out, err = listener.communicate(timeout=max(1.0, deadline - time.monotonic()))
            sent.kill()
            sent.wait(timeout=10)
        finally:
            if listener.poll() is None:
                listener.kill()
                listener.wait(timeout=10)
        assert listener.returncode == 0, err
        assert out.split() == ["hello", "10.2.0.7"]  # arrived through ovn-k8s-sub0, the remote source kept
        assert IPv4Address("169.254.254.10") in {
            IPv4Address(a["local"])
            for link in ip_json(gw, "-4", "addr", "show", "ovn-k8s-sub0")
            for a in link["addr_info"]
        }
