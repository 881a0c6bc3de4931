"""``magw lab up --cni ovn``: an OVN control plane per cluster, an OVN-K-like NB, and one OVN syncer per cluster.

Every node runs its own Open vSwitch (userspace datapath) and ``ovn-controller`` with its pods on ``br-int``
(``magw.lab.planes.ovn_nodes``), so pods' packets cross OVN for real; ``magw lab verify`` proves the OVN paths with
``ovn-trace`` and with packets (``magw.lab.verify.ovn``). The route agents run in OVN mode, as on a real
OVN-Kubernetes node.

Per cluster C, in ``<state dir>/ovn/C/`` (``magw.lab.planes.ovn_servers``): the NB and SB ``ovsdb-server``s and
``ovn-northd``, lab processes (kinds ``ovsdb-nb``, ``ovsdb-sb``, ``ovn-northd``, owner C) in C's underlay
namespace, on unix sockets only, recorded in the state file and stopped by PID by ``down``. Then the topology
OVN-Kubernetes would have built (``magw.lab.planes.ovn_topology``) from the lab's: a node switch per node with its
/24, a port per pod (its real IP and MAC), a load balancer per ClusterIP service in ``clusterLBGroup``, a
gateway router per node (the SB chassis are the nodes' ovn-controllers' own). Finally the syncer: hosted by the
route agent of C's first worker (``syncer_host``), or, for a cluster without workers, ``magw ovn sync --nb ..
--sb .. --broker-dir .. --cluster C --status-file ..`` (kind ``ovn-syncer``), which follows the file broker: its
Endpoints and its Health document.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from magw.lab.build import procs, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError, LabInputError
from magw.lab.planes import ovn_nodes, ovn_topology
from magw.lab.planes.ovn_servers import OvnDir, create_db, northd_argv, ovn_missing, server_argv
from magw.lab.planes.ovn_topology import OvnkNode, OvnkService, OvnkSpec, PodPort, ovnk_mac, tool_env
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout, PodLayout

OVN_KINDS = ("ovsdb-nb", "ovsdb-sb", "ovn-northd", "ovn-syncer")
SERVER_KINDS = OVN_KINDS[:3]
SYNCER_KIND = OVN_KINDS[3]
START_TIMEOUT = 10.0  # seconds for a server's socket to appear

Progress = Callable[[str], None]


def ovn_dir(st: LabState, cluster: str) -> OvnDir:
    """Cluster ``cluster``'s control plane files (sockets, databases, logs of the servers)."""
    return OvnDir(st.dir / "ovn" / cluster)


def syncer_status_path(st: LabState, cluster: str) -> Path:
    return st.dir / "status" / f"ovn-syncer-{cluster}.json"


def syncer_status(st: LabState, cluster: str) -> dict[str, Any] | None:
    """The syncer's last status document (``magw.daemons.route_agent.ovn_syncer``), None if none (yet) or unreadable."""
    try:
        doc = json.loads(syncer_status_path(st, cluster).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def check_supported(lab: LabLayout, control_plane: str) -> None:
    """Refuse what ``--cni ovn`` cannot build: LabInputError for a combination it does not support (exit 2),
    LabError when the OVN tools are missing."""
    if control_plane != "file":
        # With the kube control plane a worker's route agent hosts the syncer and feeds it from its own source; the
        # standalone ``magw ovn sync`` (clusters without workers: ``syncer_host``) follows the file broker only.
        alone = [c.id for c in lab.clusters if syncer_host(c) is None]
        if alone:
            raise LabInputError(
                f"--cni ovn --control-plane {control_plane}: cluster {alone[0]} has no worker to host its OVN syncer "
                "(a worker's route agent follows the API server; the standalone magw ovn sync, the file broker only)"
            )
    missing = ovn_missing() or ovn_nodes.ovs_missing()
    if missing is not None:
        raise LabError(f"--cni ovn: {missing}")


def _pod_mac(pod: PodLayout) -> str:
    """The pod's real eth0 MAC (read from its namespace); OVN-K's ``0a:58:`` + IP if it cannot be read."""
    out = subprocess.run(
        ["ip", "-n", pod.namespace, "-j", "link", "show", "dev", "eth0"],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    try:
        return str(json.loads(out.stdout)[0]["address"])
    except (ValueError, LookupError, KeyError):
        return ovnk_mac(pod.ip)


def cluster_spec(c: ClusterLayout, mac: Callable[[PodLayout], str] = _pod_mac) -> OvnkSpec:
    """OVN-K's view of lab cluster ``c``: node switches named as the nodes, pod ports ``<namespace>_<pod>``,
    the management port at the /24's last host address (the lab's pods start at .2, where OVN-K puts it),
    chassis ``chassis-<node>`` at the node IP, and each ClusterIP service with backends as a load balancer."""
    nodes = tuple(ovnk_node(c, n, mac) for n in c.nodes)
    services = tuple(
        OvnkService(
            name=f"svc-{s.namespace}-{s.name}", vip=s.ip, port=s.port, backends=s.backends, target_port=s.target_port
        )
        for s in c.services
        if s.cluster_ip is not None and s.backends
    )
    # No SB chassis from the builder: every node's ovn-controller registers its own (magw.lab.planes.ovn_nodes).
    return OvnkSpec(pod_cidr=c.pod_cidr, nodes=nodes, services=services, chassis=False)


def ovnk_node(c: ClusterLayout, n: NodeLayout, mac: Callable[[PodLayout], str] = _pod_mac) -> OvnkNode:
    """Node ``n`` of cluster ``c`` as OVN-K's topology has it (``cluster_spec``)."""
    return OvnkNode(
        name=n.name,
        subnet=n.pod_subnet,
        chassis=ovn_nodes.chassis_name(n),
        encap_ip=ovn_nodes.encap_ip(c, n).ip,
        mgmt_ip=ovn_nodes.mgmt_ip(n),
        pods=tuple(PodPort(name=ovn_nodes.pod_port(p), mac=mac(p), ip=p.ip) for p in c.pods_of(n.name)),
    )


def _start(st: LabState, c: ClusterLayout, kind: str, argv: list[str]) -> tuple[LabState, procs.ProcRecord]:
    d = ovn_dir(st, c.id).dir
    log_path = st.logs_dir / f"{kind}-{c.id}.log"
    rec = procs.start(kind=kind, owner=c.id, namespace=c.underlay_ns, argv=argv, log_path=log_path, env=tool_env(d))
    return state.add_process(st, rec), rec


def start_control_plane(lab: LabLayout, st: LabState, step: Progress) -> LabState:
    """Per cluster: the NB and SB servers and northd (each recorded at once), then OVN-K's topology."""
    waits = []
    for c in lab.clusters:
        d = ovn_dir(st, c.id)
        d.dir.mkdir(parents=True)
        for db in ("nb", "sb"):
            create_db(d.dir, db)
            st, rec = _start(st, c, f"ovsdb-{db}", server_argv(d.dir, db))
            waits.append((d.socket(db), rec))
    deadline = time.monotonic() + START_TIMEOUT
    for path, rec in waits:
        procs.wait_for_socket(path, rec, timeout=max(deadline - time.monotonic(), 0.0))
    for c in lab.clusters:
        st, _ = _start(st, c, "ovn-northd", northd_argv(ovn_dir(st, c.id).dir))
    step(f"ovn: NB, SB and ovn-northd for {len(lab.clusters)} clusters in {st.dir / 'ovn'}")
    for c in lab.clusters:
        d = ovn_dir(st, c.id)
        try:
            ovn_topology.build(d, cluster_spec(c))
            ovn_topology.wait_sb(d)
        except subprocess.CalledProcessError as exc:
            raise LabError(f"ovn: building cluster {c.id}'s NB: {exc.cmd[0]}: {(exc.stderr or '').strip()}") from None
    step("ovn: OVN-Kubernetes' topology (node switches, pods, gateway routers, clusterLBGroup, chassis) built")
    return st


def syncer_argv(st: LabState, cluster: str, magw: Path) -> list[str]:
    d = ovn_dir(st, cluster)
    return [str(magw), "--log-format", "json", "ovn", "sync", "--nb", d.nb, "--sb", d.sb,
            "--broker-dir", str(st.broker_dir), "--cluster", cluster,
            "--status-file", str(syncer_status_path(st, cluster))]  # fmt: skip


def syncer_host(c: ClusterLayout) -> NodeLayout | None:
    """The node whose route agent hosts cluster ``c``'s OVN syncer: its first worker, whose probes of the local
    gateways drive the failover (docs/ovn.md, "Failover"); None (a standalone ``magw ovn sync``, which learns
    of a failure from the broker, in seconds) for a cluster without workers: a gateway hosting it would take the
    syncer down with it."""
    return next((n for n in c.nodes if not n.gateway), None)


def hosted_syncer_flags(st: LabState, c: ClusterLayout, node: NodeLayout) -> list[str]:
    """The route agent flags that make ``node`` host ``c``'s syncer, or none if another node does."""
    host = syncer_host(c)
    if host is None or host.name != node.name:
        return []
    d = ovn_dir(st, c.id)
    return ["--ovn-nb", d.nb, "--ovn-sb", d.sb, "--ovn-status-file", str(syncer_status_path(st, c.id))]


def start_syncers(lab: LabLayout, st: LabState, step: Progress, magw: Path) -> LabState:
    """One OVN syncer per cluster (the only writer of its NB rows): a standalone ``magw ovn sync`` for each
    cluster whose syncer no route agent hosts (``syncer_host``)."""
    alone = [c for c in lab.clusters if syncer_host(c) is None]
    for c in alone:
        st, _ = _start(st, c, SYNCER_KIND, syncer_argv(st, c.id, magw))
    hosted = len(lab.clusters) - len(alone)
    step(f"ovn: {hosted} syncers hosted by a worker's route agent, {len(alone)} standalone (magw ovn sync)")
    return st


def synced(lab: LabLayout, st: LabState, c: ClusterLayout) -> bool:
    """The cluster's syncer's last sync was ok and gave a router slot to each gateway that should have one:
    every gateway (multi-active) or exactly one."""
    last = (syncer_status(st, c.id) or {}).get("last_sync") or {}
    slots = set(last.get("slots") or {})
    if last.get("ok") is not True:
        return False
    if lab.topology.multi_active:
        return slots == {g.name for g in c.gateways}
    return len(slots) == 1


def wait_synced(lab: LabLayout, st: LabState, step: Progress, deadline: float, check: Callable[[], None]) -> None:
    """Until every syncer's status file says ok with every expected gateway router (bounded by ``deadline``)."""
    last = -1
    while True:
        pending = [c.id for c in lab.clusters if not synced(lab, st, c)]
        done = len(lab.clusters) - len(pending)
        if done != last:
            step(f"ovn: {done}/{len(lab.clusters)} syncers synced")
            last = done
        if not pending:
            return
        check()
        if time.monotonic() >= deadline:
            errors = [
                f"{cid}: {((syncer_status(st, cid) or {}).get('last_sync') or {}).get('error')}" for cid in pending
            ]
            raise LabError(f"ovn: syncers not synced ({'; '.join(errors)}; see {st.logs_dir})")
        time.sleep(0.2)


def status_doc(lab: LabLayout, st: LabState) -> dict[str, Any]:
    """``status``'s ``ovn`` section: per cluster its sockets, its servers and syncer, the syncer's last sync."""
    records = {(r.kind, r.owner): r for r in st.processes}
    clusters = []
    for c in lab.clusters:
        d = ovn_dir(st, c.id)
        procs_doc: dict[str, dict[str, Any]] = {}
        host = syncer_host(c)
        for kind in OVN_KINDS:
            rec = records.get((kind, c.id))
            if kind == SYNCER_KIND and host is not None:
                rec = records.get(("route-agent", host.name))
            procs_doc[kind] = _proc_doc(rec)
        procs_doc[SYNCER_KIND]["host"] = host.name if host is not None else None
        nodes = {n.name: {k: _proc_doc(records.get((k, n.name))) for k in ovn_nodes.OVS_KINDS} for n in c.nodes}
        last = (syncer_status(st, c.id) or {}).get("last_sync")
        clusters.append(
            {"cluster": c.id, "nb": d.nb, "sb": d.sb, "processes": procs_doc, "nodes": nodes, "last_sync": last}
        )
    return {"clusters": clusters}


def _proc_doc(rec: procs.ProcRecord | None) -> dict[str, Any]:
    return {"pid": rec.pid if rec else None, "alive": rec is not None and procs.alive(rec)}
