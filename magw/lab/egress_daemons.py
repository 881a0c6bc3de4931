"""The egress gateway's daemons in the lab (issue 15): the controller per egress cluster, the HA agent per VIP
candidate.

- ``magw-egress`` (kind ``egress``, owner the cluster) in the cluster's underlay namespace: it needs no network,
  only the broker directory and its API socket, ``<state dir>/egress/api.sock`` (the agents report holders
  there with the seed's ``master_notify``).
- ``magw-egress-agent`` (kind ``egress-agent``, owner the node) in every node namespace of the egress cluster:
  keepalived and conntrackd for the VIPs the node is a candidate of (as its children, in
  ``<state dir>/egress/<node>/``), the status endpoint on ``<node IP>:9620``, holder reports to the controller.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from magw.lab import naming, procs
from magw.lab.egress import cluster_of
from magw.lab.errors import LabError
from magw.lab.layout import LabLayout, NodeLayout
from magw.lab.state import LabState

CONTROLLER = "magw-egress"
CONTROLLER_KIND = "egress"
AGENT = "magw-egress-agent"
AGENT_KIND = "egress-agent"
STATUS_PORT = 9620


def api_socket(st: LabState) -> Path:
    return st.dir / "egress" / "api.sock"


def _script(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not os.access(path, os.X_OK):
        raise LabError(f"{name}: not found next to {sys.executable} (install magw with: pip install -e .)")
    return str(path)


def controller_argv(lab: LabLayout, st: LabState) -> list[str]:
    c = cluster_of(lab)
    return [_script(CONTROLLER), "--broker-dir", str(st.broker_dir), "--cluster", c.id,
            "--socket", str(api_socket(st)), "--log-format", "json"]  # fmt: skip


def start_controller(lab: LabLayout, st: LabState) -> procs.ProcRecord:
    api_socket(st).parent.mkdir(parents=True, exist_ok=True)
    c = cluster_of(lab)
    return procs.start(
        kind=CONTROLLER_KIND, owner=c.id, namespace=c.underlay_ns, argv=controller_argv(lab, st),
        log_path=st.logs_dir / f"egress-{c.id}.log",
    )  # fmt: skip


def agent_workdir(st: LabState, node: NodeLayout) -> Path:
    return st.dir / "egress" / node.name


def agent_argv(lab: LabLayout, st: LabState, node: NodeLayout) -> list[str]:
    return [_script(AGENT), "--broker-dir", str(st.broker_dir), "--cluster", node.cluster, "--node", node.name,
            "--interface", naming.UNDERLAY_IF, "--workdir", str(agent_workdir(st, node)),
            "--controller-socket", str(api_socket(st)), "--status-listen", f"{node.node_ip}:{STATUS_PORT}",
            "--log-format", "json"]  # fmt: skip


def start_agents(lab: LabLayout, st: LabState) -> list[procs.ProcRecord]:
    """An egress agent on every node of the egress cluster (a node that is nobody's candidate runs no daemon)."""
    records = []
    for node in cluster_of(lab).nodes:
        log_path = st.logs_dir / f"egress-agent-{node.name}.log"
        argv = agent_argv(lab, st, node)
        rec = procs.start(kind=AGENT_KIND, owner=node.name, namespace=node.namespace, argv=argv, log_path=log_path)
        records.append(rec)
    return records
