"""``magw lab verify``'s ``node`` checks: the kernel and Open vSwitch side of a ``--cni ovn`` lab's route agents.

The OVN checks (``magw.lab.verify.ovn``) prove the logical paths; these prove that the route agents in OVN mode
gave each node what OVN-Kubernetes' nodes need (docs/ovn-node.md), asking the kernel (``ip route get``, which
runs the real rule and route lookup) and ``ovs-vsctl``, never magw's own state:

- **worker**: a host packet to the first pod of every other cluster goes out ``ovn-k8s-mp0`` via the management
  port's next hop, from table 150;
- **gateway**: a packet from a remote cluster's pod arriving on ``vxlan-tunnel`` for the first local pod goes
  out ``ovn-k8s-sub0`` via ``submariner_up_lrp`` (169.254.254.9), from table 149; and ``br-submariner`` exists
  with the ``ovn-k8s-sub0`` port, the userspace datapath, and the ``submariner_gateway`` bridge mapping.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

from magw.desired.ovn.node import MGMT_DEV, SUB_DEV
from magw.lab.build.state import LabState
from magw.lab.planes.ovn_nodes import mgmt_nexthop, ovs_db, ovs_dir
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout
from magw.lab.verify.check import Check
from magw.model.vtep import VXLAN_TUNNEL

UP_LRP_IP = "169.254.254.9"  # the seed's submariner_up_lrp: the gateway host's next hop into OVN
BRIDGE = "br-submariner"
MAPPING = f"submariner_gateway:{BRIDGE}"
TIMEOUT = 10


def _route_get(ns: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        ["ip", "-n", ns, "-j", "route", "get", *args], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    if out.returncode != 0:
        return {"error": out.stderr.strip()}
    found = json.loads(out.stdout)
    return found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else {"error": out.stdout}


def _route_check(what: str, got: dict[str, Any], dev: str, via: str, table: str) -> Check:
    if "error" in got:
        return Check(False, "node", f"{what}: ip route get: {got['error']}", how="state")
    seen = f"via {got.get('gateway')} dev {got.get('dev')} table {got.get('table', 'main')}"
    want = f"via {via} dev {dev} table {table}"
    text = f"{what}: {seen}" + ("" if seen == want else f" (expected {want})")
    return Check(seen == want, "node", text, how="state")


def _worker_checks(lab: LabLayout, c: ClusterLayout, node: NodeLayout) -> Iterator[Check]:
    for r in lab.clusters:
        if r.id == c.id or not r.pods:
            continue
        dst = str(r.pods[0].ip)
        got = _route_get(node.namespace, dst)
        yield _route_check(f"{node.name} host -> {r.id} pod {dst}", got, MGMT_DEV, str(mgmt_nexthop(node)), "150")


def _gateway_checks(lab: LabLayout, st: LabState, c: ClusterLayout, node: NodeLayout) -> Iterator[Check]:
    if c.pods:
        local = str(c.pods[0].ip)
        for r in lab.clusters:
            if r.id == c.id or not r.pods:
                continue
            src = str(r.pods[0].ip)
            got = _route_get(node.namespace, local, "from", src, "iif", VXLAN_TUNNEL)
            yield _route_check(f"{node.name} {r.id} pod {src} -> {local} (ingress)", got, SUB_DEV, UP_LRP_IP, "149")
    yield _bridge_check(node.name, _vsctl_bridge(ovs_db(st, node), str(ovs_dir(st, node))))


def _vsctl_bridge(remote: str, d: str) -> dict[str, str]:
    env = {"OVS_RUNDIR": d, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    args = [
        ["list-ports", BRIDGE],
        ["get", "Bridge", BRIDGE, "datapath_type"],
        ["get", "Open_vSwitch", ".", "external_ids:ovn-bridge-mappings"],
    ]
    found: dict[str, str] = {}
    for key, a in zip(("ports", "datapath", "mappings"), args, strict=True):
        out = subprocess.run(
            ["ovs-vsctl", f"--db={remote}", "--timeout=5", *a],
            capture_output=True, text=True, timeout=TIMEOUT, check=False, env=env,
        )  # fmt: skip
        found[key] = out.stdout.strip().strip('"') if out.returncode == 0 else f"error: {out.stderr.strip()}"
    return found


def _bridge_check(node: str, got: dict[str, str]) -> Check:
    ok = SUB_DEV in got["ports"].split() and got["datapath"] == "netdev" and MAPPING in got["mappings"].split(",")
    text = f"{node} {BRIDGE}: ports {got['ports'] or '-'}, datapath {got['datapath']}, mappings {got['mappings']}"
    return Check(ok, "node", text, how="state")


def node_checks(lab: LabLayout, st: LabState, c: ClusterLayout) -> Iterator[Check]:
    """Every ``node`` check of cluster ``c``: workers' table 150, gateways' table 149 and bridge."""
    for node in c.nodes:
        if node.gateway:
            yield from _gateway_checks(lab, st, c, node)
        else:
            yield from _worker_checks(lab, c, node)
