"""The node side of a ``--cni ovn`` lab: what OVN-Kubernetes would give each node, so the route agents run in
OVN mode (``config.cni: ovn``, docs/ovn-node.md).

- **Every node** gets ``ovn-k8s-mp0``, OVN-Kubernetes' management port, as one end of a veth pair whose other
  end (``ovn-k8s-mp0r``) stays in the node too: the lab has no OVN datapath behind it (see ``magw.lab.planes.ovn``).
  The lab's ``cni0`` already holds the node's ``cni_ip`` and its /24, so the port gets a link of its own,
  ``169.254.253.2/30``, and the route agents are told its next hop (``--ovn-mgmt-nexthop 169.254.253.1``,
  the stand-in of OVN-Kubernetes' ``rtos-<node>`` router port): OVN-Kubernetes' default, ``cni_ip - 1``, would
  be the lab's ``.0``. Table 150 then sends the host's traffic to remote clusters out ``ovn-k8s-mp0``.
- **Every gateway** gets a real Open vSwitch: an ``ovsdb-server`` with the vswitch schema on a unix socket and
  ``ovs-vswitchd`` with the userspace datapath (``netdev``: no openvswitch kernel module here), both lab
  processes in the gateway's namespace (kinds ``ovs-db`` and ``ovs-vswitchd``, owner the node), stopped by PID
  by ``down``. The route agent gets ``--ovs-db`` and ``--ovs-datapath-type netdev`` and makes ``br-submariner``
  with ``ovn-k8s-sub0`` (169.254.254.10) itself, as on a real node.

Files of node N: ``<state dir>/ovs/N/`` (database, socket, pid and control files, the servers' own logs).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Interface
from pathlib import Path

from magw.desired.ovn.node import MGMT_DEV
from magw.lab.build import procs, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.planes.ovn_topology import tool_env
from magw.lab.spec.layout import LabLayout, NodeLayout

MGMT_PEER = "ovn-k8s-mp0r"
MGMT_ADDRESS = IPv4Interface("169.254.253.2/30")
MGMT_NEXTHOP = IPv4Address("169.254.253.1")
VSWITCH_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
OVS_KINDS = ("ovs-db", "ovs-vswitchd")
START_TIMEOUT = 10.0
CMD_TIMEOUT = 30

Progress = Callable[[str], None]


def ovs_dir(st: LabState, node: NodeLayout) -> Path:
    return st.dir / "ovs" / node.name


def ovs_db(st: LabState, node: NodeLayout) -> str:
    """The gateway's Open vSwitch database, as the route agent's ``--ovs-db`` takes it."""
    return f"unix:{ovs_dir(st, node) / 'db.sock'}"


def ovs_missing() -> str | None:
    """Why a gateway's Open vSwitch cannot run here, or None."""
    from shutil import which

    missing = [t for t in ("ovsdb-server", "ovsdb-tool", "ovs-vswitchd", "ovs-vsctl") if which(t) is None]
    if missing:
        return f"Open vSwitch tools missing: {', '.join(missing)} (Debian openvswitch-switch)"
    if not os.path.exists(VSWITCH_SCHEMA):
        return f"no {VSWITCH_SCHEMA} (Debian openvswitch-common)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun: the userspace datapath cannot make its tap devices"
    return None


def route_agent_flags(st: LabState, node: NodeLayout) -> list[str]:
    """The route agent's OVN mode flags on ``node`` (magw.daemons.route_agent.ovn_node)."""
    flags = ["--ovn-mgmt-nexthop", str(MGMT_NEXTHOP)]
    if node.gateway:
        flags += ["--ovs-db", ovs_db(st, node), "--ovs-datapath-type", "netdev"]
    return flags


def _ip(ns: str, *args: str) -> None:
    out = subprocess.run(["ip", "-n", ns, *args], capture_output=True, text=True, timeout=CMD_TIMEOUT, check=False)
    if out.returncode != 0:
        raise LabError(f"ovn: ip -n {ns} {' '.join(args)}: {out.stderr.strip()}")


def add_mgmt_ports(lab: LabLayout, step: Progress) -> None:
    """``ovn-k8s-mp0`` (with its peer) on every node, up, with ``MGMT_ADDRESS``."""
    for node in lab.nodes:
        _ip(node.namespace, "link", "add", MGMT_DEV, "type", "veth", "peer", "name", MGMT_PEER)
        _ip(node.namespace, "addr", "add", str(MGMT_ADDRESS), "dev", MGMT_DEV)
        _ip(node.namespace, "link", "set", MGMT_PEER, "up")
        _ip(node.namespace, "link", "set", MGMT_DEV, "up")
    step(f"ovn: {MGMT_DEV} ({MGMT_ADDRESS}, next hop {MGMT_NEXTHOP}) on {len(lab.nodes)} nodes")


def _start(st: LabState, node: NodeLayout, kind: str, argv: list[str]) -> tuple[LabState, procs.ProcRecord]:
    log_path = st.logs_dir / f"{kind}-{node.name}.log"
    # ovs-vswitchd looks for its bridges' control sockets in OVS_RUNDIR: keep everything in the node's directory.
    env = tool_env(ovs_dir(st, node))
    rec = procs.start(kind=kind, owner=node.name, namespace=node.namespace, argv=argv, log_path=log_path, env=env)
    return state.add_process(st, rec), rec


def start_gateway_ovs(lab: LabLayout, st: LabState, step: Progress) -> LabState:
    """An ``ovsdb-server`` and an ``ovs-vswitchd`` (netdev) per gateway, in its namespace."""
    gateways = [n for n in lab.nodes if n.gateway]
    for node in gateways:
        d = ovs_dir(st, node)
        d.mkdir(parents=True)
        subprocess.run(
            ["ovsdb-tool", "create", str(d / "conf.db"), VSWITCH_SCHEMA],
            check=True, capture_output=True, env=tool_env(d), timeout=CMD_TIMEOUT,
        )  # fmt: skip
        st, rec = _start(st, node, "ovs-db", [
            "ovsdb-server", "--no-chdir", f"--remote=punix:{d}/db.sock", f"--pidfile={d}/db.pid",
            f"--unixctl={d}/db.ctl", f"--log-file={d}/db.log", str(d / "conf.db"),
        ])  # fmt: skip
        procs.wait_for_path(d / "db.sock", rec, timeout=START_TIMEOUT)
        init = subprocess.run(
            ["ovs-vsctl", f"--db={ovs_db(st, node)}", "--no-wait", "init"],
            capture_output=True, text=True, env=tool_env(d), timeout=CMD_TIMEOUT, check=False,
        )  # fmt: skip
        if init.returncode != 0:
            raise LabError(f"ovn: ovs-vsctl init on {node.name}: {init.stderr.strip()}")
        st, rec = _start(st, node, "ovs-vswitchd", [
            "ovs-vswitchd", ovs_db(st, node), "--no-chdir", f"--pidfile={d}/vswitchd.pid",
            f"--unixctl={d}/vswitchd.ctl", f"--log-file={d}/vswitchd.log",
        ])  # fmt: skip
        procs.wait_for_path(d / "vswitchd.pid", rec, timeout=START_TIMEOUT)
    step(f"ovn: Open vSwitch (userspace datapath) on {len(gateways)} gateways in {st.dir / 'ovs'}")
    return st
