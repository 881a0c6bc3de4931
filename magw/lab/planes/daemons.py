"""The real daemons in the lab: broker documents and one process per node (the wait until they carry traffic:
``magw.lab.planes.readiness``).

The lab writes the Cluster, Config and Node documents of the file broker
(docs/filebroker.md); each gateway's ``magw-gateway`` publishes its own
Endpoint document. ``magw-route-agent`` runs in every node namespace and
programs that node's whole plan there. With Globalnet, one ``magw-globalnet``
controller per cluster (in the cluster's underlay namespace: it needs no
network, and nothing of it may listen on the host) allocates the global IPs.

With ``--control-plane kube`` (``magw.lab.planes.kube``) the same daemons run with ``--source kube`` against an API
server emulator per cluster, the gateways syncing with the broker's emulator; the lab writes Kubernetes
objects instead of documents and reads the emulators back (``magw.lab.observe.kube_view``) where it read the broker.

With ``--cni ovn`` (``magw.lab.planes.ovn``) each cluster also gets an OVN control plane (its syncer hosted by the
first worker's route agent), each node an Open vSwitch and an ovn-controller with its pods on ``br-int``
(``magw.lab.planes.ovn_nodes``); the route agents run in OVN mode, and the waits include the syncers before the
pod-to-pod traffic, which crosses OVN.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import yaml

from magw.desired.ovn.node import MGMT_DEV
from magw.lab.build import builds, procs, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.planes import egressgw_daemons, kube, kube_objects, ovn_nodes
from magw.lab.planes import ovn as lab_ovn
from magw.lab.planes.egressgw import egressgw_documents
from magw.lab.planes.globalnet_docs import globalnet_documents
from magw.lab.spec import naming
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout, layout
from magw.model.cable import Cable
from magw.sources.file.atomic import write_atomic
from magw.sources.file.endpoint_files import endpoint_path

ROUTE_AGENT = "magw-route-agent"
GATEWAY = "magw-gateway"
GLOBALNET = "magw-globalnet"
MAGW = "magw"
# Each node namespace has its own 127.0.0.1, so every daemon can use the same port.
ROUTE_AGENT_METRICS_PORT = 9101
GATEWAY_METRICS_PORT = 9102
GLOBALNET_METRICS_PORT = 9103  # in the cluster's underlay namespace, beside the egress controller's (9104)

Progress = Callable[[str], None]


def script(name: str) -> Path:
    """A console script of this installation (next to the running interpreter)."""
    path = Path(sys.executable).parent / name
    if not os.access(path, os.X_OK):
        raise LabError(f"{name}: not found next to {sys.executable} (install magw with: pip install -e .)")
    return path


def daemons_installed() -> bool:
    """True when the daemon console scripts are installed next to the interpreter."""
    return all(os.access(Path(sys.executable).parent / n, os.X_OK) for n in (ROUTE_AGENT, GATEWAY, GLOBALNET))


def broker_documents(lab: LabLayout, cni: str = "generic") -> dict[str, dict[str, Any]]:
    """File name -> document: every Cluster, the Config, and every Node (gateways with their public IP); with
    Globalnet also each cluster's global CIDR and Kubernetes objects (``magw.lab.planes.globalnet_docs``)."""
    topo = lab.topology
    docs: dict[str, dict[str, Any]] = {
        "config.yaml": {
            "kind": "Config",
            "multi_active_gateway": topo.multi_active,
            "strategy": topo.strategy.value,
            "underlay_mtu": topo.underlay_mtu,
        }
    }
    if topo.cable is not Cable.VXLAN:  # the gateways run the WireGuard cable (docs/cables.md)
        docs["config.yaml"]["cable"] = topo.cable.value
    if cni != "generic":  # the route agents plan the CNI's node side from it (docs/ovn-node.md)
        docs["config.yaml"]["cni"] = cni
    client_ip = keeps_client_ip(lab, cni)
    if client_ip:  # the key and the nodes' pod_cidrs only then: a build before them refuses both
        docs["config.yaml"]["keep_client_ip"] = True
    for c in lab.clusters:
        docs[f"cluster-{c.id}.yaml"] = {
            "kind": "Cluster",
            "id": c.id,
            "pod_cidrs": [str(c.pod_cidr)],
            "service_cidrs": [str(c.service_cidr)],
        }
        if c.global_cidr is not None:
            docs[f"cluster-{c.id}.yaml"]["global_cidrs"] = [str(c.global_cidr)]
        for n in c.nodes:
            docs[node_file(n)] = node_document(n, cni, client_ip=client_ip)
    return docs | globalnet_documents(lab) | egressgw_documents(lab)


def keeps_client_ip(lab: LabLayout, cni: str) -> bool:
    """The topology's keep_client_ip, on the generic CNI only (OVN balances services in its routers:
    docs/client-ip.md)."""
    return lab.topology.keep_client_ip and cni == "generic"


def node_file(node: NodeLayout) -> str:
    """The broker file of a node's Node document."""
    return f"node-{node.cluster}-{node.name}.yaml"


def node_document(node: NodeLayout, cni: str = "generic", *, client_ip: bool = False) -> dict[str, Any]:
    # On OVN the node's address in the pod network is its management port's (magw.lab.planes.ovn_nodes).
    cni_ip = ovn_nodes.mgmt_ip(node) if cni == "ovn" else node.cni_ip
    doc: dict[str, Any] = {
        "kind": "Node",
        "cluster": node.cluster,
        "name": node.name,
        "ip": str(node.node_ip),
        "cni_ip": str(cni_ip),
        "gateway": node.gateway,
    }
    if node.public_ip is not None:
        doc["public_ip"] = str(node.public_ip)
    if node.public_port is not None:
        doc["public_port"] = node.public_port
    if client_ip:
        doc["pod_cidrs"] = [str(node.pod_subnet)]
    return doc


def write_broker(lab: LabLayout, broker_dir: Path, cni: str = "generic") -> None:
    """Write the lab's documents, each atomically (temp file + rename)."""
    broker_dir.mkdir(parents=True, exist_ok=True)
    for fname, doc in broker_documents(lab, cni).items():
        write_document(broker_dir, fname, doc)


def write_document(broker_dir: Path, fname: str, doc: dict[str, Any]) -> None:
    """One broker document, atomically (``magw.sources.file.atomic``: a reader sees the old text or the new)."""
    write_atomic(broker_dir / fname, yaml.safe_dump(doc, sort_keys=False))


def endpoint_file(broker_dir: Path, node: NodeLayout) -> Path:
    """Where ``magw-gateway`` publishes a gateway's Endpoint document."""
    return endpoint_path(broker_dir, node.cluster, node.name)


def _source_flags(st: LabState, cluster: str) -> list[str]:
    return kube.source_flags(st, cluster) if st.kube else ["--broker-dir", str(st.broker_dir)]


def node_state_dir(st: LabState, node: NodeLayout) -> Path:
    """A node's ``--state-dir`` (its WireGuard key pair; the route agent's wireguard-go pid file and log)."""
    return st.dir / "state" / node.name


def _common_flags(st: LabState, node: NodeLayout, metrics_port: int) -> list[str]:
    return [*_source_flags(st, node.cluster), "--node", node.name, "--cluster", node.cluster,
            "--log-format", "json", "--log-level", "info", "--metrics-port", str(metrics_port),
            "--state-dir", str(node_state_dir(st, node))]  # fmt: skip


def agent_status_path(st: LabState, node: NodeLayout) -> Path:
    """Where a node's route agent writes its JSON status after every sync (``--status-file``)."""
    return st.dir / "status" / f"route-agent-{node.name}.json"


def agent_status(st: LabState, node: NodeLayout) -> dict[str, Any] | None:
    """The route agent's last status document, None if there is none (yet) or it is unreadable."""
    try:
        doc = json.loads(agent_status_path(st, node).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def route_agent_argv(st: LabState, node: NodeLayout) -> list[str]:
    status = ["--status-file", str(agent_status_path(st, node))]
    # it publishes its Node's cniIfaceIp from there: cni0, or on OVN the management port (as OVN-K nodes do)
    cni = ["--cni-interface", MGMT_DEV if st.ovn else naming.CNI_BRIDGE] if st.kube else []
    egress = st.topology.egressgw
    # The kube source reads the egress gateway's kinds only when asked (their CRDs may be absent): its cluster's.
    egress_flag = ["--egress"] if st.kube and egress is not None and egress.cluster == node.cluster else []
    ovn: list[str] = []
    if st.ovn:
        cluster = layout(st.name, st.topology).cluster(node.cluster)
        ovn = [*ovn_nodes.route_agent_flags(st, node), *lab_ovn.hosted_syncer_flags(st, cluster, node)]
    return [str(script(ROUTE_AGENT)), *_common_flags(st, node, ROUTE_AGENT_METRICS_PORT), *status, *cni, *egress_flag,
            *ovn, *_cable_probe_flags(st), "--lease-exit-hold", RESTART_HOLD]  # fmt: skip


# With the WireGuard cable the lab's gateways run wireguard-go, and the probes between them cross it in userspace
# on both ends: on these shared 2-core machines its scheduling delays cost probes their 20 ms deadline and took
# live gateways down (docs/cables.md, "Known limits"). The lab gives them room: misses after 40 ms, the fast
# re-probe every 50 ms (the timeout may not exceed the shortest jittered interval), and down after 8 misses, not 3:
# a stall of about 0.45 s passes. A clean-clone CI run saw one gateway's wireguard-go stall 0.3-0.4 s (both its
# cable peers called down together, 0.2 s before they were up again) and, in another, every flow of the
# load-balancer test lose half its datagrams to such flaps. Detection then takes about 0.5 s instead of 0.2 s.
# No budget: every 100 ms, as when these were measured (a 30 ms interval would send the 8 probes 40 ms apart, the
# timeout, and tolerate a stall of about 0.3 s only).
WIREGUARD_PROBE_FLAGS = (
    "--probe-fast-interval", "0.05", "--probe-timeout", "0.04", "--down-after", "8", "--probe-budget", "0"
)  # fmt: skip


# A restart's holds: how long a cleanly stopped route agent keeps answering its gateway's probes
# (``--lease-exit-hold``) and a gateway keeps its Endpoint fresh (``--exit-hold``) for the next process. Their
# default, 10 s, was shorter than a Python daemon's start on these shared 2-core machines under load (12-16 s in
# the lab's rolling upgrade: the gateway went down and its flows moved); the lab gives them 30 s.
RESTART_HOLD = "30"


def gateway_restart_flags(build: str) -> tuple[str, ...]:
    """``--exit-hold`` for a gateway of ``build``, if that build has the flag (older ones refuse it)."""
    return ("--exit-hold", RESTART_HOLD) if builds.gateway_holds(build) else ()


def with_gateway_restart_flags(argv: tuple[str, ...], build: str) -> tuple[str, ...]:
    """A gateway's recorded command line made right for ``build``: ``--exit-hold`` added or dropped."""
    base: list[str] = []
    rest = iter(argv)
    for arg in rest:
        if arg == "--exit-hold":
            next(rest, None)
            continue
        base.append(arg)
    return (*base, *gateway_restart_flags(build))


def _cable_probe_flags(st: LabState) -> tuple[str, ...]:
    """The cable's probe room, then the topology's ``probe:`` keys (the last of a repeated flag wins)."""
    cable = WIREGUARD_PROBE_FLAGS if st.topology.cable is Cable.WIREGUARD else ()
    return (*cable, *(st.topology.probe.flags() if st.topology.probe is not None else ()))


def gateway_argv(st: LabState, node: NodeLayout, build: str = "") -> list[str]:
    argv = [str(script(GATEWAY)), *_common_flags(st, node, GATEWAY_METRICS_PORT), "--private-ip", str(node.node_ip)]
    if not st.kube:  # the file broker's Endpoint hold (--source kube has Leases)
        argv += gateway_restart_flags(build)
    if node.public_port is not None:  # behind the cloud: metrics its health check can reach
        argv += ["--metrics-address", "0.0.0.0"]
    if node.public_port is not None and st.kube:  # the Kubernetes way: the Service's status
        argv += ["--public-service", kube_objects.public_service_name(node)]
    elif node.public_port is not None:  # its address and listener on the cloud
        argv += ["--public-ip", str(node.public_ip), "--public-port", str(node.public_port)]
    elif node.public_ip is not None:
        argv += ["--public-ip", str(node.public_ip)]
    if node.nat_source_ip is not None:  # the cloud's NAT, beside its load balancer
        argv += ["--nat-source-ip", str(node.nat_source_ip)]
    if st.kube:
        argv += kube.gateway_flags(st, node, agent_status_path(st, node))
    return argv


def globalnet_argv(st: LabState, cluster: ClusterLayout, build: str = "") -> list[str]:
    """The cluster's Globalnet controller, its metrics on GLOBALNET_METRICS_PORT of the cluster's underlay."""
    source = kube.globalnet_flags(st, cluster) if st.kube else _source_flags(st, cluster.id)
    return [str(script(GLOBALNET)), *source, "--cluster", cluster.id, "--log-format", "json", "--log-level", "info",
            *builds.metrics_flags(build, "globalnet", GLOBALNET_METRICS_PORT)]  # fmt: skip


def start_all(lab: LabLayout, st: LabState, step: Progress, build: str = "") -> LabState:
    """Write the broker documents (or start the emulators and create the objects: ``kube.start_control_plane``),
    then start a route agent on every node and a gateway daemon on each gateway; with Globalnet first a
    controller per cluster (the gateways publish the addresses it allocates). ``build``: the magw source tree the
    daemons run from (``magw.lab.build.builds``; "" = the installed one); the lab's own servers (emulators, OVN)
    run from the installed one."""
    if st.kube:
        st = kube.start_control_plane(lab, st, step)
    else:
        write_broker(lab, st.broker_dir, st.cni)
        step(f"broker: {len(broker_documents(lab, st.cni))} documents in {st.broker_dir}")
    (st.dir / "status").mkdir(exist_ok=True)
    for node in lab.nodes:
        node_state_dir(st, node).mkdir(mode=0o700, parents=True, exist_ok=True)
    if st.ovn:
        st = lab_ovn.start_control_plane(lab, st, step)
        st = ovn_nodes.start_ovs(lab, st, step)
        st = ovn_nodes.start_chassis(lab, st, step, lambda c: lab_ovn.ovn_dir(st, c.id))
        state.write(st)
        deadline = time.monotonic() + lab_ovn.START_TIMEOUT * 3
        ovn_nodes.wait_chassis(lab, st, lambda c: lab_ovn.ovn_dir(st, c.id), step, deadline, lambda: check_alive(st))
    records = list(st.processes)
    if lab.topology.globalnet:
        for c in lab.clusters:
            log_path = st.logs_dir / f"globalnet-{c.id}.log"
            argv = globalnet_argv(st, c, build)
            records.append(
                procs.start(
                    kind="globalnet", owner=c.id, namespace=c.underlay_ns, argv=argv, log_path=log_path, build=build
                )
            )
        step(f"daemons: {len(lab.clusters)} Globalnet controllers started")
    if lab.topology.egressgw is not None:
        records.append(egressgw_daemons.start_controller(lab, st, script, build))
        agents = egressgw_daemons.start_agents(lab, st, script, build)
        records += agents
        cluster = lab.topology.egressgw.cluster
        step(f"daemons: the egress controller and {len(agents)} egress agents of cluster {cluster}")
    for node in lab.nodes:
        records.append(start_daemon(st, node, "route-agent", route_agent_argv(st, node), build))
        if node.gateway:
            records.append(start_daemon(st, node, "gateway", gateway_argv(st, node, build), build))
    n_gw = len(lab.gateways)
    step(f"daemons: {len(lab.nodes)} route agents and {n_gw} gateway daemons started (logs in {st.logs_dir})")
    if build:
        step(f"daemons: run from {build} (PYTHONPATH)")
    st = attrs.evolve(st, processes=tuple(records))
    return lab_ovn.start_syncers(lab, st, step, script(MAGW)) if st.ovn else st


def start_daemon(st: LabState, node: NodeLayout, kind: str, argv: list[str], build: str) -> procs.ProcRecord:
    """One of ``node``'s daemons, its log ``<kind>-<node>.log`` in the lab's logs."""
    log_path = st.logs_dir / f"{kind}-{node.name}.log"
    return procs.start(kind=kind, owner=node.name, namespace=node.namespace, argv=argv, log_path=log_path, build=build)


def check_alive(st: LabState) -> None:
    for rec in st.processes:
        if rec.kind != "echo" and not procs.alive(rec):
            tail = _last_line(Path(rec.log))
            raise LabError(f"{rec.kind} on {rec.owner} exited: {tail} (log: {rec.log})")


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "empty log"
