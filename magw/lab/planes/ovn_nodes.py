"""The node side of a ``--cni ovn`` lab: an OVN-Kubernetes node's datapath, for real, on every lab node.

Every node N gets, in its own namespace (files in ``<state dir>/ovs/N/``):

- an ``ovsdb-server`` (vswitch schema, unix socket ``db.sock``) and an ``ovs-vswitchd`` with the userspace
  datapath (``netdev``: no openvswitch kernel module here), lab processes of kinds ``ovs-db`` and
  ``ovs-vswitchd`` (owner N), stopped by PID by ``down``. Run inside the namespace, ovs-vswitchd learns its
  tunnel routes from the namespace's own routing table;
- ``br-phy`` (netdev), OVN's tunnel leg: the node's second underlay veth ``eth1`` is its port, and the bridge's
  own interface holds the node's **encap address** (``encap_ip``: the node IP's host part in the underlay's next
  /24, 172.(17+i).1.x). A second leg keeps the node's kernel traffic (``eth0``, the node IP: magw's probes and
  ``vx-submariner``) off the userspace datapath;
- ``br-int`` (netdev, ``fail_mode=secure``) with every pod's veth as a ``system`` port whose
  ``external_ids:iface-id`` is the pod's logical switch port (``<namespace>_<pod>``), and ``ovn-k8s-mp0``,
  OVN-Kubernetes' management port, as an internal port (iface-id ``k8s-N``, MAC OVN-K's ``0a:58:`` + address)
  holding ``mgmt_ip`` (the node subnet's last host address: the lab's pods start at .2, where OVN-K puts it),
  with routes to the cluster's pod and service CIDRs via the node's ``rtos-`` router port (the subnet's .1), and
  OVN-Kubernetes' management port SNAT (``mgmt_snat_script``): whatever the host sends into OVN through
  ``ovn-k8s-mp0`` leaves with the port's address, as OVN-K's ``OVN-KUBE-SNAT-MGMTPORT`` rule does;
- ``ovn-controller`` (kind ``ovn-controller``) connected to the cluster's SB by its unix socket (a file path
  reaches it from any namespace), registering chassis ``chassis-N`` with hostname N and encap geneve at
  ``encap_ip``. It has no ``--unixctl`` in 23.03: ``OVN_RUNDIR`` puts its control socket in the node's directory.

On gateways the route agent (OVN mode, ``--ovs-db``, ``--ovs-datapath-type netdev``) makes ``br-submariner`` with
``ovn-k8s-sub0`` in the same Open vSwitch and maps ``submariner_gateway`` to it; ovn-controller then patches it
to ``br-int``, so OVN's ``submariner_gateway*`` localnet ports reach the gateway's kernel (docs/ovn-node.md).

The datapath facts this depends on (measured, docs/ovn.md "The lab carries packets"): both bridges and
``external_ids:ovn-bridge-datapath-type`` must be ``netdev``; checksum offload must be off on every interface
whose packets the userspace datapath reads through AF_PACKET or a tap (``offload_off_argv``): it forwards partial
checksums as they are, and UDP arrives with bad checksums.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Interface
from pathlib import Path

from magw.desired.ovn.node import MGMT_DEV
from magw.lab.build import procs, state, wiring
from magw.lab.build.pool import parallel
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.planes.ovn_servers import OvnDir
from magw.lab.planes.ovn_topology import ovnk_mac, sbctl, tool_env
from magw.lab.spec import naming
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout, PodLayout

VSWITCH_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
OVS_KINDS = ("ovs-db", "ovs-vswitchd", "ovn-controller")
NODE_TOOLS = ("ovsdb-server", "ovsdb-tool", "ovs-vswitchd", "ovs-vsctl", "ovn-controller", "ethtool")
INT_BRIDGE = "br-int"
PHY_BRIDGE = "br-phy"
ENCAP_TYPE = "geneve"
START_TIMEOUT = 10.0
CMD_TIMEOUT = 30

Progress = Callable[[str], None]


def ovs_dir(st: LabState, node: NodeLayout) -> Path:
    return st.dir / "ovs" / node.name


def ovs_db(st: LabState, node: NodeLayout) -> str:
    """The node's Open vSwitch database, as the route agent's ``--ovs-db`` takes it."""
    return f"unix:{ovs_dir(st, node) / 'db.sock'}"


def chassis_name(node: NodeLayout) -> str:
    return f"chassis-{node.name}"


def mgmt_ip(node: NodeLayout) -> IPv4Address:
    """``ovn-k8s-mp0``'s address: the node subnet's last host address (OVN-K's .2 is the lab's first pod)."""
    return node.pod_subnet.broadcast_address - 1


def mgmt_nexthop(node: NodeLayout) -> IPv4Address:
    """The node's ``rtos-<node>`` router port: the subnet's .1 (the lab's ``cni_ip``, the pods' gateway)."""
    return node.cni_ip


def encap_ip(cluster: ClusterLayout, node: NodeLayout) -> IPv4Interface:
    """The node's geneve address on ``br-phy``: its node IP's host part in the underlay's next /24."""
    offset = int(node.node_ip) - int(cluster.underlay.network_address)
    net = cluster.underlay.network_address + cluster.underlay.num_addresses
    return IPv4Interface(f"{net + offset}/{cluster.underlay.prefixlen}")


def ovs_missing() -> str | None:
    """Why a node's Open vSwitch and ovn-controller cannot run here, or None."""
    from shutil import which

    missing = [t for t in NODE_TOOLS if which(t) is None]
    if missing:
        return (
            f"tools missing: {', '.join(missing)} (Debian openvswitch-switch, ovn-host, ethtool; scripts/setup.sh "
            "installs them)"
        )
    if not os.path.exists(VSWITCH_SCHEMA):
        return f"no {VSWITCH_SCHEMA} (Debian openvswitch-common)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun: the userspace datapath cannot make its tap devices"
    return None


def pod_port(pod: PodLayout) -> str:
    """OVN-K's name of a pod's logical switch port (the ``iface-id`` of its veth on ``br-int``):
    ``<kubernetes namespace>_<pod name>``."""
    return f"{pod.kube_namespace}_{pod.name}"


def offload_off_argv(namespace: str, dev: str) -> list[str]:
    """Checksum offload off on ``dev`` in ``namespace`` (see the module docstring)."""
    return ["ip", "netns", "exec", namespace, "ethtool", "-K", dev, "tx", "off"]


MGMT_SNAT_TABLE = "lab-ovnk"


def mgmt_snat_script(node: NodeLayout) -> str:
    """OVN-Kubernetes' ``-o ovn-k8s-mp0 -j SNAT --to-source <mgmt IP>`` ("OVN SNAT to Management Port"), as an nft
    table of the lab: a packet the host routes into OVN by the management port (rather than by magw's table 149
    and ``ovn-k8s-sub0``) reaches the pod with the node's address as its source, not the remote client's."""
    return (
        f"table ip {MGMT_SNAT_TABLE} {{\n"
        "  chain mgmtport-snat {\n"
        "    type nat hook postrouting priority srcnat; policy accept;\n"
        f'    oifname "{MGMT_DEV}" snat to {mgmt_ip(node)} comment "OVN SNAT to Management Port (OVN-Kubernetes)"\n'
        "  }\n"
        "}\n"
    )


def route_agent_flags(st: LabState, node: NodeLayout) -> list[str]:
    """The route agent's OVN mode flags on ``node`` (magw.daemons.route_agent.ovn_node)."""
    flags = ["--ovn-mgmt-nexthop", str(mgmt_nexthop(node))]
    if node.gateway:
        flags += ["--ovs-db", ovs_db(st, node), "--ovs-datapath-type", "netdev"]
    return flags


def _run(argv: list[str], what: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=CMD_TIMEOUT, check=False, env=env,
                         input=stdin)  # fmt: skip
    if out.returncode != 0:
        raise LabError(f"ovn: {what}: {out.stderr.strip() or f'exit {out.returncode}'}")
    return out.stdout


def _ip(ns: str, *args: str) -> None:
    _run(["ip", "-n", ns, *args], f"ip -n {ns} {' '.join(args)}")


def vsctl(st: LabState, node: NodeLayout, *args: str) -> str:
    """``ovs-vsctl`` on the node's database (waits until ovs-vswitchd applied the change)."""
    d = ovs_dir(st, node)
    return _run(["ovs-vsctl", f"--db={ovs_db(st, node)}", "--timeout=20", *args], f"ovs-vsctl on {node.name}",
                tool_env(d))  # fmt: skip


def _start(st: LabState, node: NodeLayout, kind: str, argv: list[str]) -> procs.ProcRecord:
    log_path = st.logs_dir / f"{kind}-{node.name}.log"
    # ovs-vswitchd and ovn-controller look for bridges' control sockets in OVS_RUNDIR, ovn-controller puts its
    # own in OVN_RUNDIR: keep everything in the node's directory.
    env = {**tool_env(ovs_dir(st, node)), "OVN_RUNDIR": str(ovs_dir(st, node))}
    return procs.start(kind=kind, owner=node.name, namespace=node.namespace, argv=argv, log_path=log_path, env=env)


def start_node_ovs(st: LabState, node: NodeLayout) -> list[procs.ProcRecord]:
    """The node's ``ovsdb-server`` (initialised) and ``ovs-vswitchd``; their records, recorded by the caller."""
    d = ovs_dir(st, node)
    d.mkdir(parents=True)
    _run(["ovsdb-tool", "create", str(d / "conf.db"), VSWITCH_SCHEMA], f"ovsdb-tool create on {node.name}",
         tool_env(d))  # fmt: skip
    db = _start(st, node, "ovs-db", [
        "ovsdb-server", "--no-chdir", f"--remote=punix:{d}/db.sock", f"--pidfile={d}/db.pid",
        f"--unixctl={d}/db.ctl", f"--log-file={d}/db.log", str(d / "conf.db"),
    ])  # fmt: skip
    records = [db]
    try:
        procs.wait_for_socket(d / "db.sock", db, timeout=START_TIMEOUT)
        vsctl(st, node, "--no-wait", "init")
        vswitchd = _start(st, node, "ovs-vswitchd", [
            "ovs-vswitchd", ovs_db(st, node), "--no-chdir", f"--pidfile={d}/vswitchd.pid",
            f"--unixctl={d}/vswitchd.ctl", f"--log-file={d}/vswitchd.log",
        ])  # fmt: skip
        records.append(vswitchd)
        procs.wait_for_path(d / "vswitchd.pid", vswitchd, timeout=START_TIMEOUT)
    except BaseException:
        procs.stop(tuple(records))  # not recorded yet: stop them here
        raise
    return records


def start_ovs(lab: LabLayout, st: LabState, step: Progress) -> LabState:
    """An ``ovsdb-server`` and an ``ovs-vswitchd`` (netdev) in every node's namespace."""
    results = parallel(start_node_ovs, ((st, n) for n in lab.nodes))
    for records in results:
        for rec in records:
            st = state.add_process(st, rec)
    step(f"ovn: Open vSwitch (userspace datapath) on {len(lab.nodes)} nodes in {st.dir / 'ovs'}")
    return st


OFCTRL_WAIT_MS = 3000


def bridges(st: LabState, lab: LabLayout, sb: str, c: ClusterLayout, node: NodeLayout) -> None:
    """The chassis configuration, ``br-phy`` and ``br-int`` with the pods and ``ovn-k8s-mp0``: one transaction;
    then the kernel side (addresses, routes, checksum offload)."""
    ext = {
        "system-id": chassis_name(node),
        "hostname": node.name,
        "ovn-remote": sb,
        "ovn-encap-type": ENCAP_TYPE,
        "ovn-encap-ip": str(encap_ip(c, node).ip),
        "ovn-bridge-datapath-type": "netdev",
        # A restarted ovn-controller computes its flows before it clears the old ones (ovn-controller(8)); at 0, the
        # default, the node's datapath drops for the recompute (the soak's kill-ovn-controller: docs/robustness.md).
        "ovn-ofctrl-wait-before-clear": str(OFCTRL_WAIT_MS),
    }
    args = ["set", "Open_vSwitch", ".", *(f"external_ids:{k}={json.dumps(v)}" for k, v in ext.items())]
    args += ["--", "add-br", INT_BRIDGE, "--", "set", "Bridge", INT_BRIDGE, "datapath_type=netdev",
             "fail_mode=secure", "other_config:disable-in-band=true"]  # fmt: skip
    args += ["--", "add-br", PHY_BRIDGE, "--", "set", "Bridge", PHY_BRIDGE, "datapath_type=netdev",
             "--", "add-port", PHY_BRIDGE, naming.ENCAP_IF]  # fmt: skip
    mp0_mac = ovnk_mac(mgmt_ip(node))
    args += ["--", "add-port", INT_BRIDGE, MGMT_DEV, "--", "set", "Interface", MGMT_DEV, "type=internal",
             f'mac="{mp0_mac}"', f"external_ids:iface-id=k8s-{node.name}"]  # fmt: skip
    for pod in c.pods_of(node.name):
        args += ["--", "add-port", INT_BRIDGE, pod.host_if, "--", "set", "Interface", pod.host_if,
                 f"external_ids:iface-id={pod_port(pod)}"]  # fmt: skip
    vsctl(st, node, *args)
    ns = node.namespace
    _ip(ns, "addr", "add", str(encap_ip(c, node)), "dev", PHY_BRIDGE)
    _ip(ns, "link", "set", PHY_BRIDGE, "up")
    _ip(ns, "link", "set", MGMT_DEV, "mtu", str(wiring.pod_mtu(lab, ovn=True)), "up")
    _ip(ns, "addr", "add", f"{mgmt_ip(node)}/{node.pod_subnet.prefixlen}", "dev", MGMT_DEV)
    for cidr in (c.pod_cidr, c.service_cidr):
        _ip(ns, "route", "add", str(cidr), "via", str(mgmt_nexthop(node)), "dev", MGMT_DEV)
    _run(offload_off_argv(ns, MGMT_DEV), f"ethtool on {node.name}")
    _run(["ip", "netns", "exec", ns, "nft", "-f", "-"], f"nft on {node.name}", stdin=mgmt_snat_script(node))


def _phy_mac(node: NodeLayout) -> str:
    return _run(["ip", "netns", "exec", node.namespace, "cat", f"/sys/class/net/{PHY_BRIDGE}/address"],
                f"{PHY_BRIDGE}'s MAC on {node.name}").strip()  # fmt: skip


def prime_tunnel_neighbours(lab: LabLayout, st: LabState) -> int:
    """Give every node's userspace datapath the MAC of each other node's encap address (``tnl/neigh/set``).

    The userspace datapath resolves a tunnel's next hop with an ARP of its own and drops the packet that needed
    it; the first packets between two chassis are lost so. With OVN's load balancers that first-use loss left some
    of the first UDP flows through a new gateway router dark for as long as they sent (docs/ovn.md, "A new gateway
    router's first flows"); the kernel datapath of real nodes resolves through the kernel's neighbour table, which
    queues instead. The lab therefore starts with its tunnels resolved. Returns the entries set."""
    macs = {n.name: _phy_mac(n) for n in lab.nodes}
    pairs = [(c, node, peer) for c in lab.clusters for node in c.nodes for peer in c.nodes if peer.name != node.name]
    for c, node, peer in pairs:
        _neigh_set(st, c, node, peer, macs[peer.name])
    return len(pairs)


def prime_node_neighbours(st: LabState, c: ClusterLayout, new: NodeLayout) -> int:
    """``prime_tunnel_neighbours`` for one node joining cluster ``c`` (``magw lab add-gateway``): it learns every
    other node's encap MAC, and they learn its own (a node made again has a new ``br-phy`` MAC). Returns the
    entries set."""
    macs = {n.name: _phy_mac(n) for n in c.nodes}
    others = [n for n in c.nodes if n.name != new.name]
    for peer in others:
        _neigh_set(st, c, new, peer, macs[peer.name])
        _neigh_set(st, c, peer, new, macs[new.name])
    return 2 * len(others)


def _neigh_set(st: LabState, c: ClusterLayout, node: NodeLayout, peer: NodeLayout, mac: str) -> None:
    """``node``'s userspace datapath learns ``peer``'s encap address at ``mac``."""
    ctl = str(ovs_dir(st, node) / "vswitchd.ctl")
    _run(["ovs-appctl", "-t", ctl, "tnl/neigh/set", PHY_BRIDGE, str(encap_ip(c, peer).ip), mac],
         f"tnl/neigh/set on {node.name}")  # fmt: skip


def start_chassis(lab: LabLayout, st: LabState, step: Progress, sb: Callable[[ClusterLayout], OvnDir]) -> LabState:
    """Every node's bridges and ports, then its ``ovn-controller`` (``wait_chassis`` waits for their chassis)."""
    pairs = [(c, n) for c in lab.clusters for n in c.nodes]
    parallel(bridges, ((st, lab, sb(c).sb, c, n) for c, n in pairs))
    step(f"ovn: br-int (pods, {MGMT_DEV}) and br-phy ({naming.ENCAP_IF}, the encap address) on {len(pairs)} nodes")
    step(f"ovn: {prime_tunnel_neighbours(lab, st)} tunnel neighbours set in the userspace datapaths")
    for _c, node in pairs:
        st = state.add_process(st, start_controller(st, node))
    step(f"ovn: {len(pairs)} ovn-controllers started")
    return st


def start_controller(st: LabState, node: NodeLayout) -> procs.ProcRecord:
    """The node's ``ovn-controller`` (the caller records it)."""
    d = ovs_dir(st, node)
    return _start(st, node, "ovn-controller", [
        "ovn-controller", ovs_db(st, node), "--no-chdir", f"--pidfile={d}/ovn-controller.pid",
        f"--log-file={d}/ovn-controller.log",
    ])  # fmt: skip


def wait_chassis(lab: LabLayout, st: LabState, dirs: Callable[[ClusterLayout], OvnDir], step: Progress,
                 deadline: float, check: Callable[[], None]) -> None:  # fmt: skip
    """Until every node's chassis is in its cluster's SB (bounded by ``deadline``)."""
    for c in lab.clusters:
        want = {chassis_name(n) for n in c.nodes}
        while True:
            got = set(sbctl(dirs(c), "--bare", "--columns=name", "list", "Chassis").split())
            if want <= got:
                break
            check()
            if time.monotonic() >= deadline:
                missing = ", ".join(sorted(want - got))
                raise LabError(f"ovn: cluster {c.id}: no chassis registered for {missing} (see {st.logs_dir})")
            time.sleep(0.2)
    step(f"ovn: every node's chassis registered ({len(lab.nodes)})")
