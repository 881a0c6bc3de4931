"""keep_client_ip in the lab (docs/client-ip.md): a remote client's connection to a ClusterIP Service keeps the
client's address all the way to the backend, with every gateway active, and its replies come back through the
gateway that took it in.

Kernel tests. For each lab (the plain default and the Globalnet example), UDP flows and TCP connections go from an
east pod to west's ``echo`` Service. The echo servers report the source they saw. The serving gateways' conntrack
tables are read with the ``conntrack`` tool (accounting switched on in those lab namespaces only): each flow has
its DNAT entry on exactly one gateway, and that entry counted the flow's replies, so they crossed that gateway;
the entries sit on more than one gateway and point at backends on other nodes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from ipaddress import IPv4Address, ip_address

import pytest

from magw.lab.build.state import LabState
from magw.lab.planes.daemons import daemons_installed
from magw.lab.scenarios import failure
from magw.lab.spec.layout import ECHO_PORT, LabLayout
from magw.lab.spec.topology import default_topology, load_topology
from magw.lab.verify.connectivity import udp_flows
from tests.support import netns as checker
from tests.support.globalnet_lab import ingress_ip
from tests.support.labkit import running_lab
from tests.support.paths import EXAMPLES

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed next to the interpreter"),
]

UDP_FLOWS, TCP_FLOWS, PACKETS = 32, 16, 5
HELD = 16  # TCP connections held across the ingress gateway's power loss



def _entries(ns: str, proto: str, cluster_ip: IPv4Address) -> list[dict[str, str | int]]:
    """The conntrack entries of ``ns`` whose original destination is ``cluster_ip:ECHO_PORT`` (kube-proxy's DNAT
    of a remote client's connection), read with ``conntrack -L -o xml``."""
    done = checker.run(ns, "conntrack", "-L", "-p", proto, "-o", "xml", check=False)
    assert done.returncode == 0, done.stderr
    out = []
    for flow in ET.fromstring(done.stdout).iter("flow"):
        sides = {m.get("direction"): m for m in flow.iter("meta") if m.get("direction") in ("original", "reply")}
        orig, reply = sides["original"], sides["reply"]
        if orig.findtext("layer3/dst") != str(cluster_ip) or orig.findtext("layer4/dport") != str(ECHO_PORT):
            continue
        out.append({
            "client": orig.findtext("layer3/src") or "",
            "sport": int(orig.findtext("layer4/sport") or 0),
            "backend": reply.findtext("layer3/src") or "",
            "requests": int(orig.findtext("counters/packets") or 0),
            "replies": int(reply.findtext("counters/packets") or 0),
        })  # fmt: skip
    return out


def _prepare(lab: LabLayout) -> None:
    """Conntrack accounting on and an empty table on west's gateways (per-namespace sysctl: lab namespaces only)."""
    for gw in lab.cluster("west").gateways:
        checker.run(gw.namespace, "sysctl", "-q", "-w", "net.netfilter.nf_conntrack_acct=1")
        checker.run(gw.namespace, "conntrack", "-F", check=False)


def _node_of(lab: LabLayout) -> dict[str, str]:
    return {str(p.ip): p.node for p in lab.cluster("west").pods}


def _check_through_ingress(lab: LabLayout, proto: str, flows: int, cluster_ip: IPv4Address) -> None:
    held = {gw.name: _entries(gw.namespace, proto, cluster_ip) for gw in lab.cluster("west").gateways}
    entries = [(gw, e) for gw, items in held.items() for e in items]
    assert len(entries) == flows, f"{proto}: one DNAT entry per flow on exactly one gateway: {held}"
    if proto == "udp":  # each request answered, and the answer counted by the gateway that took the request in
        assert [(e["requests"], e["replies"]) for _gw, e in entries] == [(PACKETS, PACKETS)] * flows, held
    else:  # each connection's echo replies (and its handshake) came back through its gateway
        assert all(int(e["replies"]) >= PACKETS for _gw, e in entries), held
    assert len({gw for gw, _e in entries}) >= 2, f"{proto}: the flows did not spread over the gateways: {held}"
    node = _node_of(lab)
    elsewhere = [e for gw, e in entries if node[str(e["backend"])] != gw]
    assert elsewhere, f"{proto}: no flow reached a backend on another node than its gateway: {held}"


def _run(lab: LabLayout, target: IPv4Address, cluster_ip: IPv4Address, client_ok: Callable[[str], bool]) -> None:
    client = next(p for p in lab.cluster("east").pods if not lab.node(p.node).gateway)
    for proto, flows in (("udp", UDP_FLOWS), ("tcp", TCP_FLOWS)):
        _prepare(lab)
        doc = udp_flows(client.namespace, target, ECHO_PORT, flows=flows, packets=PACKETS, proto=proto)
        assert doc["received"] == doc["sent"] == flows * PACKETS, doc
        seen = {ip for f in doc["per_flow"] for ip in f["seen_ips"]}
        assert seen and all(client_ok(ip) for ip in seen), f"{proto}: the backends saw {sorted(seen)}"
        _check_through_ingress(lab, proto, flows, cluster_ip)


def _ingress_gateway_dies(lab: LabLayout, st: LabState, cluster_ip: IPv4Address) -> None:
    """TCP connections held through both west gateways while west-gw1 loses power: every connection that neither
    entered through west-gw1 nor ended on a backend there survives; the others are the only ones allowed to break."""
    client = next(p for p in lab.cluster("east").pods if not lab.node(p.node).gateway)
    _prepare(lab)
    argv = ["ip", "netns", "exec", client.namespace, sys.executable, "-m", "magw.lab.payload.tcpkeep", "hold",
            "--target", f"{cluster_ip}:{ECHO_PORT}", "--conns", str(HELD), "--interval", "0.05", "--duration", "8",
            "--timeout", "3"]  # fmt: skip
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as hold:
        try:
            time.sleep(2.5)  # every connection open and echoing
            node = _node_of(lab)
            way = {
                int(e["sport"]): (gw.name, node[str(e["backend"])])
                for gw in lab.cluster("west").gateways
                for e in _entries(gw.namespace, "tcp", cluster_ip)
            }
            failure.fail(st.name, "west-gw1")
            out, err = hold.communicate(timeout=60)
        finally:
            if hold.poll() is None:
                hold.kill()
    doc = json.loads(out or "{}")
    assert doc.get("established") == HELD, err
    untouched = [c for c in doc["connections"] if "west-gw1" not in way[c["sport"]]]
    crossed = [c for c in doc["connections"] if "west-gw1" in way[c["sport"]]]
    print(f"west-gw1 down: {sum(c['survived'] for c in untouched)}/{len(untouched)} connections that avoided it "
          f"survived, {sum(c['survived'] for c in crossed)}/{len(crossed)} that crossed it")  # fmt: skip
    assert untouched, f"no connection avoided west-gw1: {way}"
    assert [c for c in untouched if not c["survived"]] == [], way
    assert all(c["seen_ip"] == str(client.ip) for c in untouched)


def test_plain_lab_backends_see_the_client_pod_and_reply_through_its_gateway() -> None:
    """Then west-gw1 loses power, and only the connections that crossed it may break."""
    with running_lab(default_topology(), daemons=True) as (lab, st):
        assert lab.topology.keep_client_ip
        svc = lab.cluster("west").services[0]
        assert svc.ip is not None
        client = next(p for p in lab.cluster("east").pods if not lab.node(p.node).gateway)
        _run(lab, svc.ip, svc.ip, lambda ip: ip == str(client.ip))
        _ingress_gateway_dies(lab, st, svc.ip)


def test_globalnet_lab_backends_see_the_client_global_egress_ip() -> None:
    """Overlapping CIDRs: the backend sees an address of east's global CIDR (the client's global egress IP by
    precedence, which the Globalnet demo's matrix checks address by address), never a west address."""
    with running_lab(load_topology(EXAMPLES / "lab-globalnet.yaml"), daemons=True) as (lab, st):
        svc = lab.cluster("west").services[0]
        east = lab.cluster("east").global_cidr
        assert svc.ip is not None and east is not None
        target = ingress_ip(st, "west", "default", f"svc-{svc.name}")
        _run(lab, target, svc.ip, lambda ip: ip_address(ip) in east)
