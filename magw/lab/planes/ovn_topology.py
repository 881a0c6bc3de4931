"""An OVN-Kubernetes-like NB topology, built with ``ovn-nbctl`` and ``ovn-sbctl`` (not with magw's own driver).

One builder for the OVN tests (``tests/support/ovn_fixture.py``), the benchmark and ``magw lab up --cni ovn``: what
OVN-Kubernetes itself would have created before magw's syncer runs, from OVN-K's documented layout
(docs/design/architecture and its NB dumps):

- ``ovn_cluster_router``: one ``rtos-<node>`` port per node switch (the node subnet's .1, MAC ``0a:58:`` + IP),
  ``rtoj-ovn_cluster_router`` on ``join`` (100.64.0.1/16), a src-ip static route per node subnet toward that
  node's gateway router, and OVN-K's own allow policies (priority 102: pod to pod, pod to join);
- a node switch per node (named as the node, ``other_config:subnet``) with ``stor-<node>``, the management
  port ``k8s-<node>`` and one port per pod (addresses ``MAC IP``);
- ``join`` (100.64.0.0/16) with a gateway router ``GR_<node>`` per node (join address 100.64.0.(i+1)), pinned
  to the node's chassis (``options:chassis``);
- two load balancers per service (TCP and UDP), all in ``clusterLBGroup``, which every ``GR_<node>`` uses;
- an SB ``Chassis`` per node (encap geneve, its IP) whose ``hostname`` is the node name, as ovn-controller
  would register it.

The tools run as subprocesses with ``OVS_RUNDIR``/``OVS_DBDIR``/``OVS_LOGDIR`` set to the databases' own
directory, so nothing touches the host's default OVS paths.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Protocol

import attrs

CMD_TIMEOUT = 30
CLUSTER_ROUTER = "ovn_cluster_router"
JOIN_SWITCH = "join"
JOIN_ROUTER_IP = "100.64.0.1"
JOIN_CIDR = "100.64.0.0/16"
LB_GROUP = "clusterLBGroup"


class Databases(Protocol):
    """Where an NB/SB pair is: its directory (the tools' run dir) and the two remotes (``unix:PATH``)."""

    @property
    def dir(self) -> Path: ...

    @property
    def nb(self) -> str: ...

    @property
    def sb(self) -> str: ...


def tool_env(d: Path) -> dict[str, str]:
    """The environment for an OVS/OVN tool of the databases in ``d``: its run, db and log dirs there."""
    return {**os.environ, "OVS_RUNDIR": str(d), "OVS_DBDIR": str(d), "OVS_LOGDIR": str(d)}


def ctl(tool: str, db: str, d: Path, args: Sequence[str]) -> str:
    """Run ``ovn-nbctl``/``ovn-sbctl`` against ``db``; CalledProcessError (with stderr) when it fails."""
    out = subprocess.run(
        [tool, f"--db={db}", "--timeout=20", *args],
        check=True, capture_output=True, text=True, env=tool_env(d), timeout=CMD_TIMEOUT,
    )  # fmt: skip
    return out.stdout


def nbctl(dbs: Databases, *args: str) -> str:
    return ctl("ovn-nbctl", dbs.nb, dbs.dir, args)


def sbctl(dbs: Databases, *args: str) -> str:
    return ctl("ovn-sbctl", dbs.sb, dbs.dir, args)


def wait_sb(dbs: Databases) -> None:
    """Wait until northd has compiled the current NB into the SB."""
    nbctl(dbs, "--wait=sb", "sync")


def ovnk_mac(ip: IPv4Address | str) -> str:
    """OVN-Kubernetes' MAC for an address it assigns: ``0a:58:`` and the four octets."""
    return "0a:58:" + ":".join(f"{b:02x}" for b in IPv4Address(ip).packed)


@attrs.frozen(kw_only=True)
class PodPort:
    """A pod's logical switch port (OVN-K names it ``<namespace>_<pod>``)."""

    name: str
    mac: str
    ip: IPv4Address


@attrs.frozen(kw_only=True)
class OvnkNode:
    name: str  # the node switch's name and the chassis hostname
    subnet: IPv4Network  # its pod subnet; .1 is the router port
    chassis: str  # the SB chassis name
    encap_ip: IPv4Address  # the chassis' geneve address (the node IP)
    mgmt_ip: IPv4Address  # the management port k8s-<node> (OVN-K: .2; the lab: a free address)
    pods: tuple[PodPort, ...] = ()


@attrs.frozen(kw_only=True)
class OvnkService:
    """A ClusterIP service as OVN-K's load balancers: ``vip:port`` -> ``backend:target_port`` (TCP and UDP)."""

    name: str
    vip: IPv4Address
    port: int
    backends: tuple[IPv4Address, ...]
    target_port: int


@attrs.frozen(kw_only=True)
class OvnkSpec:
    pod_cidr: IPv4Network
    nodes: tuple[OvnkNode, ...]
    services: tuple[OvnkService, ...] = ()
    chassis: bool = True  # register an SB Chassis per node (False: tests of a missing chassis)


LB_PROTOCOLS = ("tcp", "udp")


def lb_names(svc: OvnkService) -> tuple[str, str]:
    """The service's load balancers, one per protocol as OVN-K has them: ``<name>`` (TCP), ``<name>-udp``."""
    return svc.name, f"{svc.name}-udp"


def _router_pair(dbs: Databases, router: str, lrp: str, mac: str, net: str, switch: str, lsp: str) -> None:
    nbctl(
        dbs, "lrp-add", router, lrp, mac, net,
        "--", "lsp-add", switch, lsp, "--", "lsp-set-type", lsp, "router",
        "--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, f"router-port={lrp}",
    )  # fmt: skip


def _node(dbs: Databases, index: int, node: OvnkNode, *, chassis: bool) -> None:
    name, net = node.name, node.subnet
    router_ip = net.network_address + 1
    nbctl(dbs, "ls-add", name, "--", "set", "logical_switch", name, f"other_config:subnet={net}")
    _router_pair(dbs, CLUSTER_ROUTER, f"rtos-{name}", ovnk_mac(router_ip), f"{router_ip}/{net.prefixlen}", name,
                 f"stor-{name}")  # fmt: skip
    ports = [("k8s-" + name, ovnk_mac(node.mgmt_ip), node.mgmt_ip), *((p.name, p.mac, p.ip) for p in node.pods)]
    cmds: list[str] = []
    for port, mac, ip in ports:
        cmds += ["--", "lsp-add", name, port, "--", "lsp-set-addresses", port, f"{mac} {ip}"]
    nbctl(dbs, *cmds[1:])
    gr = f"GR_{name}"
    join_ip = IPv4Address(JOIN_ROUTER_IP) + index
    nbctl(dbs, "lr-add", gr, "--", "set", "logical_router", gr, f"options:chassis={node.chassis}")
    _router_pair(dbs, gr, f"rtoj-{gr}", ovnk_mac(join_ip), f"{join_ip}/16", JOIN_SWITCH, f"jtor-{gr}")
    nbctl(dbs, "--policy=src-ip", "lr-route-add", CLUSTER_ROUTER, str(net), str(join_ip))
    if chassis:
        sbctl(dbs, "chassis-add", node.chassis, "geneve", str(node.encap_ip),
              "--", "set", "chassis", node.chassis, f"hostname={name}")  # fmt: skip


def build(dbs: Databases, spec: OvnkSpec) -> None:
    """Create OVN-K's objects of ``spec`` in an empty NB (and its chassis in the SB); see the module docstring."""
    nbctl(dbs, "lr-add", CLUSTER_ROUTER, "--", "ls-add", JOIN_SWITCH)
    _router_pair(dbs, CLUSTER_ROUTER, f"rtoj-{CLUSTER_ROUTER}", ovnk_mac(JOIN_ROUTER_IP), f"{JOIN_ROUTER_IP}/16",
                 JOIN_SWITCH, f"jtor-{CLUSTER_ROUTER}")  # fmt: skip
    for i, node in enumerate(spec.nodes, start=1):
        _node(dbs, i, node, chassis=spec.chassis)
    # OVN-Kubernetes' own policies: pod to pod and pod to join are allowed as they are.
    cidr = spec.pod_cidr
    nbctl(dbs, "lr-policy-add", CLUSTER_ROUTER, "102", f"ip4.src == {cidr} && ip4.dst == {cidr}", "allow")
    nbctl(dbs, "lr-policy-add", CLUSTER_ROUTER, "102", f"ip4.src == {cidr} && ip4.dst == {JOIN_CIDR}", "allow")
    names = [name for svc in spec.services for name in lb_names(svc)]
    for svc in spec.services:
        backends = ",".join(f"{b}:{svc.target_port}" for b in svc.backends)
        for name, proto in zip(lb_names(svc), LB_PROTOCOLS, strict=True):
            nbctl(dbs, "lb-add", name, f"{svc.vip}:{svc.port}", backends, proto)
    nbctl(dbs, "create", "Load_Balancer_Group", f"name={LB_GROUP}")
    for name in names:
        lb = nbctl(dbs, "--bare", "--columns=_uuid", "find", "Load_Balancer", f"name={name}").strip()
        nbctl(dbs, "add", "Load_Balancer_Group", LB_GROUP, "load_balancer", lb)
    group = _lb_group(dbs)
    for node in spec.nodes:
        nbctl(dbs, "add", "Logical_Router", f"GR_{node.name}", "load_balancer_group", group)


def _lb_group(dbs: Databases) -> str:
    return nbctl(dbs, "--bare", "--columns=_uuid", "find", "Load_Balancer_Group", f"name={LB_GROUP}").strip()


def add_node(dbs: Databases, index: int, node: OvnkNode) -> None:
    """A node joining a built topology, as OVN-K adds it: its switch and ports, ``GR_<node>`` at join address
    ``100.64.0.(index + 1)`` in ``clusterLBGroup``, its src-ip route (no SB chassis: its ovn-controller registers
    one). ``index`` must be free: the node's 1-based position among the cluster's nodes, as ``build`` numbers them."""
    _node(dbs, index, node, chassis=False)
    nbctl(dbs, "add", "Logical_Router", f"GR_{node.name}", "load_balancer_group", _lb_group(dbs))


def remove_node(dbs: Databases, name: str, subnet: IPv4Network, chassis: str) -> None:
    """A node leaving, as OVN-K deletes it: its switch (with its ports), its ``rtos-`` and ``jtor-`` ports, its
    gateway router, its src-ip route and its SB chassis; what is already gone is skipped (idempotent)."""
    gr = f"GR_{name}"
    nbctl(dbs, "--if-exists", "ls-del", name, "--", "--if-exists", "lr-del", gr,
          "--", "--if-exists", "lrp-del", f"rtos-{name}", "--", "--if-exists", "lsp-del", f"jtor-{gr}",
          "--", "--if-exists", "--policy=src-ip", "lr-route-del", CLUSTER_ROUTER, str(subnet))  # fmt: skip
    sbctl(dbs, "--if-exists", "chassis-del", chassis)
