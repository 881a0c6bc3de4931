"""A gateway node joining a running ``--cni ovn`` lab, and leaving it (``magw lab add-gateway``/``remove-gateway``).

Joining, the node gets what ``up`` gives every OVN node (``magw.lab.planes.ovn_nodes``), in the order a real node
gets it from OVN-Kubernetes: its Open vSwitch (``ovsdb-server``, ``ovs-vswitchd``, netdev); its rows in the
cluster's NB, as OVN-K's cluster manager adds a node (its switch with ``stor-`` and the management port ``k8s-``,
``rtos-`` on ``ovn_cluster_router``, ``GR_<node>`` on ``join`` in ``clusterLBGroup``, its src-ip route:
``magw.lab.planes.ovn_topology.add_node``); its bridges and ``ovn-k8s-mp0``; the tunnel neighbours both ways;
its ``ovn-controller``, until its chassis is in the SB. An added gateway has no pods. Then ``grow`` starts its
route agent (OVN mode, ``--ovs-db``), which makes ``br-submariner``, and the cluster's OVN syncer gives it a
router slot once its Endpoint is published (``wait_ready`` waits for that).

Leaving, after its daemons and Open vSwitch stopped: its NB rows and its SB chassis go, as OVN-K deletes a node
(``ovn_topology.remove_node``), and its Open vSwitch directory. The syncer removes the gateway's own rows (its
``submariner_router`` and its slot's routes) when its Endpoint goes, before that.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from magw.lab.build import procs, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.planes import ovn as lab_ovn
from magw.lab.planes import ovn_nodes, ovn_topology
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout

Progress = Callable[[str], None]


def add_node(lab: LabLayout, st: LabState, c: ClusterLayout, node: NodeLayout, step: Progress,
             deadline: float) -> LabState:  # fmt: skip
    """Make ``node`` (the last of ``c.nodes``) an OVN node of the running lab; the returned state records its
    processes (each written to the state file as it starts: ``state.add_process``)."""
    d = lab_ovn.ovn_dir(st, c.id)
    for rec in ovn_nodes.start_node_ovs(st, node):
        st = state.add_process(st, rec)
    index = next(i for i, n in enumerate(c.nodes, start=1) if n.name == node.name)
    try:
        ovn_topology.add_node(d, index, lab_ovn.ovnk_node(c, node))
    except subprocess.CalledProcessError as exc:
        raise LabError(f"ovn: adding {node.name} to cluster {c.id}'s NB: {(exc.stderr or '').strip()}") from None
    ovn_nodes.bridges(st, lab, d.sb, c, node)
    primed = ovn_nodes.prime_node_neighbours(st, c, node)
    step(f"{node.name}: Open vSwitch, its NB rows (switch, GR_{node.name}, join address), br-int and br-phy; "
         f"{primed} tunnel neighbours set")  # fmt: skip
    controller = ovn_nodes.start_controller(st, node)
    st = state.add_process(st, controller)

    def alive() -> None:  # its exit is named at once, not as a chassis missing at the deadline
        if not procs.alive(controller):
            raise LabError(f"ovn: {node.name}'s ovn-controller exited (see {st.logs_dir})")

    # up's wait, on the grown lab: the other nodes' chassis are there already
    ovn_nodes.wait_chassis(lab, st, lambda cl: lab_ovn.ovn_dir(st, cl.id), step, deadline, alive)
    ovn_topology.wait_sb(d)
    return st


def remove_node(st: LabState, c: ClusterLayout, node: NodeLayout) -> str:
    """Delete ``node``'s NB rows and SB chassis and its Open vSwitch directory (its processes stopped before);
    what was done, in words."""
    try:
        ovn_topology.remove_node(lab_ovn.ovn_dir(st, c.id), node.name, node.pod_subnet, ovn_nodes.chassis_name(node))
    except subprocess.CalledProcessError as exc:
        raise LabError(f"ovn: removing {node.name} from cluster {c.id}'s NB: {(exc.stderr or '').strip()}") from None
    shutil.rmtree(ovn_nodes.ovs_dir(st, node), ignore_errors=True)
    return "its NB rows and SB chassis deleted"
