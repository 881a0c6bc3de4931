"""The egress gateway's daemons in the lab (docs/lab.md): the controller per egress cluster, the HA agent per VIP
candidate.

- ``magw-egress`` (kind ``egress``, owner the cluster) in the cluster's underlay namespace: it needs no network,
  only the broker directory (with ``--control-plane kube``, the cluster's API server) and its API socket,
  ``<state dir>/egress/api.sock`` (the agents report holders there with the seed's ``master_notify``).
- ``magw-egress-agent`` (kind ``egress-agent``, owner the node) in every node namespace of the egress cluster:
  keepalived and conntrackd for the VIPs the node is a candidate of (as its children, in
  ``<state dir>/egress/<node>/``), the status endpoint on ``<node IP>:9620``, holder reports to the controller.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from magw.lab.build import builds, procs
from magw.lab.build.state import LabState
from magw.lab.planes import kube
from magw.lab.planes.egressgw import cluster_of
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, NodeLayout

CONTROLLER = "magw-egress"
CONTROLLER_KIND = "egress"
AGENT = "magw-egress-agent"
AGENT_KIND = "egress-agent"
STATUS_PORT = 9620
METRICS_PORT = 9104  # the controller's, in the cluster's underlay namespace (the Globalnet controller's: 9103)

Script = Callable[[str], Path]  # a console script's path (magw.lab.planes.daemons.script)


def api_socket(st: LabState) -> Path:
    return st.dir / "egress" / "api.sock"


def source_flags(st: LabState, cluster: str) -> list[str]:
    """The broker directory, or with ``--control-plane kube`` the cluster's API server (read and, for the
    controller, written: statuses and bindings)."""
    return kube.source_flags(st, cluster) if st.kube else ["--broker-dir", str(st.broker_dir)]


def controller_argv(lab: LabLayout, st: LabState, script: Script, build: str = "") -> list[str]:
    c = cluster_of(lab)
    return [str(script(CONTROLLER)), *source_flags(st, c.id), "--cluster", c.id,
            "--socket", str(api_socket(st)), "--log-format", "json",
            *builds.metrics_flags(build, "egressgw", METRICS_PORT)]  # fmt: skip


def start_controller(lab: LabLayout, st: LabState, script: Script, build: str = "") -> procs.ProcRecord:
    api_socket(st).parent.mkdir(parents=True, exist_ok=True)
    c = cluster_of(lab)
    return procs.start(
        kind=CONTROLLER_KIND, owner=c.id, namespace=c.underlay_ns, argv=controller_argv(lab, st, script, build),
        log_path=st.logs_dir / f"egress-{c.id}.log", build=build,
    )  # fmt: skip


def agent_workdir(st: LabState, node: NodeLayout) -> Path:
    return st.dir / "egress" / node.name


def agent_argv(st: LabState, node: NodeLayout, script: Script) -> list[str]:
    return [str(script(AGENT)), *source_flags(st, node.cluster), "--cluster", node.cluster, "--node", node.name,
            "--interface", naming.UNDERLAY_IF, "--workdir", str(agent_workdir(st, node)),
            "--controller-socket", str(api_socket(st)), "--status-listen", f"{node.node_ip}:{STATUS_PORT}",
            "--log-format", "json"]  # fmt: skip


def start_agents(lab: LabLayout, st: LabState, script: Script, build: str = "") -> list[procs.ProcRecord]:
    """An egress agent on every node of the egress cluster (a node that is nobody's candidate runs no daemon)."""
    return [start_agent(st, node, script, build) for node in cluster_of(lab).nodes]


def start_agent(st: LabState, node: NodeLayout, script: Script, build: str = "") -> procs.ProcRecord:
    log_path = st.logs_dir / f"egress-agent-{node.name}.log"
    argv = agent_argv(st, node, script)
    return procs.start(kind=AGENT_KIND, owner=node.name, namespace=node.namespace, argv=argv, log_path=log_path,
                       build=build)  # fmt: skip
