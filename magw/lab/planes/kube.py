"""``magw lab up --control-plane kube``: an API server emulator per cluster and one for the broker.

**An emulator for tests and the lab, not a production control plane** (docs/kubeemu.md): ``python -m
magw.kubeemu`` keeps everything in memory, with no authentication, admission or schema validation. What it
gives the lab is the daemons' real Kubernetes path: ``--source kube``, list/watch, Leases, status
subresources and the gateways' broker sync, instead of the file broker.

Each emulator is a lab process (kind ``kubeemu``, or ``kubeemu-broker``), recorded in the state file and
stopped by PID by ``down`` after every daemon (``procs.stop``). It runs inside a lab namespace (a cluster's in
its underlay namespace, the broker's in the WAN namespace) and serves on a unix socket under the lab's state
directory, ``kube/cluster-<id>.sock`` and ``kube/broker.sock``: a path on the file system, which every node
namespace reaches, and nothing listens on any network. The kubeconfigs next to them point there
(``unix://``). ``up`` then creates each cluster's objects (``magw.lab.planes.kube_objects``) through HTTP, as any
client would; the broker starts empty, the gateways fill it. Each emulator keeps its objects in
``kube/<stem>.state.json`` (``--persist``), so one SIGKILLed and started again with its command line comes back
with them (``benchmarks/soak.py``, fault ``kill-apiserver``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from ipaddress import IPv4Network
from pathlib import Path

import attrs

from magw.lab.build import procs, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.planes.kube_http import KubeHttp, KubeHttpError
from magw.lab.planes.kube_kubectl import KUBECTL_HOST, KUBECTL_PORT, crd_flags, kubectl_kubeconfig, listen_flags
from magw.lab.planes.kube_objects import BROKER_NAMESPACE, NAMESPACE, cluster_objects
from magw.lab.spec import naming
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout

KUBELET = "kubelet"  # a cluster's lab kubelet (magw.lab.kubelet), stopped with the daemons, before the emulators
EMULATOR_KINDS = procs.STOP_LAST  # "kubeemu" (a cluster's), "kubeemu-broker": stopped after the daemons
CLUSTER_EMULATOR, BROKER_EMULATOR = EMULATOR_KINDS
BROKER = "broker"
START_TIMEOUT = 20.0  # seconds for an emulator to serve (it imports aiohttp first)
_POLL = 0.05

Progress = Callable[[str], None]


@attrs.frozen(kw_only=True)
class ApiServer:
    """One emulator of a lab: a cluster's (``name`` = cluster id) or the broker's (``name`` = "broker")."""

    name: str
    role: str  # "cluster" or "broker"
    netns: str  # the lab namespace its process runs in
    namespace: str  # the Kubernetes namespace of magw's objects there
    socket: Path
    kubeconfig: Path
    pidfile: Path
    state_file: Path  # --persist: the objects survive a SIGKILL of the emulator (its restart loads them)
    pod_logs: Path  # the containers' logs its cluster's lab kubelet writes, served as the pods' logs

    @property
    def kind(self) -> str:
        return BROKER_EMULATOR if self.role == BROKER else CLUSTER_EMULATOR

    def http(self, timeout: float = 5.0) -> KubeHttp:
        return KubeHttp(str(self.socket), timeout=timeout)


def _api(st: LabState, stem: str, **fields: str) -> ApiServer:
    d = st.kube_dir
    return ApiServer(
        socket=d / f"{stem}.sock", kubeconfig=d / f"{stem}.kubeconfig", pidfile=d / f"{stem}.pid",
        state_file=d / f"{stem}.state.json", pod_logs=d / "pod-logs" / stem, **fields,
    )  # fmt: skip


def cluster_api(st: LabState, cluster: str) -> ApiServer:
    """Cluster ``cluster``'s emulator (``cluster-`` keeps a cluster named "broker" apart from the broker)."""
    return _api(
        st,
        f"cluster-{cluster}",
        name=cluster,
        role="cluster",
        netns=naming.underlay_ns(st.name, cluster),
        namespace=NAMESPACE,
    )


def broker_api(st: LabState) -> ApiServer:
    return _api(st, "broker", name=BROKER, role=BROKER, netns=naming.wan_ns(st.name), namespace=BROKER_NAMESPACE)


def api_servers(st: LabState) -> tuple[ApiServer, ...]:
    """Every emulator of the lab: the clusters' in topology order, then the broker's."""
    return (*(cluster_api(st, c.id) for c in st.topology.clusters), broker_api(st))


def service_ip_range(c: ClusterLayout) -> IPv4Network:
    """Where a cluster's emulator allocates the ClusterIPs of Services made through the API: the upper half of its
    service CIDR (the topology's Services and the load balancers' take addresses near its start)."""
    return list(c.service_cidr.subnets(prefixlen_diff=1))[1]


def emulator_argv(api: ApiServer, service_ips: IPv4Network | None = None) -> list[str]:
    """The daemons' unix socket, the state file and the CRDs' columns and schemas (``up`` adds kubectl's TCP
    listener, inside the emulator's lab namespace: ``kube_kubectl.listen_flags``). With ``--persist`` an emulator
    restarted with the same command line (the soak's ``kill-apiserver``) comes back with every object, as an API
    server does over etcd, and its clients' watches from older versions get 410 and list again."""
    return [sys.executable, "-m", "magw.kubeemu", "--socket", str(api.socket), "--pidfile", str(api.pidfile),
            "--persist", str(api.state_file), "--pod-logs", str(api.pod_logs), *crd_flags(),
            *(["--service-ip-range", str(service_ips)] if service_ips is not None else [])]  # fmt: skip


def source_flags(st: LabState, cluster: str) -> list[str]:
    """A daemon's source: the cluster's emulator instead of the broker directory."""
    api = cluster_api(st, cluster)
    return ["--source", "kube", "--kubeconfig", str(api.kubeconfig), "--namespace", api.namespace]


def gateway_flags(st: LabState, node: NodeLayout, health_file: Path) -> list[str]:
    """A gateway's extra flags: the broker to sync Endpoints and Clusters with, the route agent's status file
    for the Gateway status, and a stable identity (the node's name), so a gateway restarted by ``magw lab
    recover`` renews its own Lease at once instead of waiting for it to expire."""
    broker = broker_api(st)
    return ["--broker-kubeconfig", str(broker.kubeconfig), "--broker-namespace", broker.namespace,
            "--health-status-file", str(health_file), "--identity", node.name]  # fmt: skip


def globalnet_flags(st: LabState, cluster: ClusterLayout) -> list[str]:
    return [*source_flags(st, cluster.id), "--identity", f"globalnet-{cluster.id}"]


def _wait_serving(api: ApiServer, rec: procs.ProcRecord, deadline: float) -> None:
    """Until the emulator wrote its pidfile (it does once it serves) and its socket exists."""
    while not (api.pidfile.exists() and api.socket.exists()):
        if not procs.alive(rec):
            raise LabError(f"API server emulator {api.name} exited (see {rec.log})")
        if time.monotonic() >= deadline:
            raise LabError(f"API server emulator {api.name}: not serving after {START_TIMEOUT:g} s (see {rec.log})")
        time.sleep(_POLL)


def start_control_plane(lab: LabLayout, st: LabState, step: Progress) -> LabState:
    """Start every emulator (each recorded in the state file at once), write their kubeconfigs, and create each
    cluster's objects. Returns the state with the emulators' processes added."""
    from magw.sources.kube.client import write_kubeconfig  # kubernetes-asyncio: only for a kube lab

    st.kube_dir.mkdir(exist_ok=True)
    servers = api_servers(st)
    started = []
    ranges = {c.id: service_ip_range(c) for c in lab.clusters}
    for api in servers:
        log_path = st.logs_dir / f"kubeemu-{api.name}.log"
        service_ips = ranges.get(api.name) if api.role != BROKER else None
        argv = [*emulator_argv(api, service_ips), *listen_flags()]  # started inside api.netns: 127.0.0.1 there
        rec = procs.start(kind=api.kind, owner=api.name, namespace=api.netns, argv=argv, log_path=log_path)
        started.append((api, rec))
        st = attrs.evolve(st, processes=(*st.processes, rec))
        state.write(st)
    deadline = time.monotonic() + START_TIMEOUT
    for api, rec in started:
        _wait_serving(api, rec, deadline)
        write_kubeconfig(api.kubeconfig, f"unix://{api.socket}", api.namespace, name=f"magw-lab-{api.name}")
        kubectl_url = f"http://{KUBECTL_HOST}:{KUBECTL_PORT}"
        write_kubeconfig(kubectl_kubeconfig(api.socket), kubectl_url, api.namespace, name=f"magw-lab-{api.name}")
    step(f"control plane: {len(servers)} API server emulators ({', '.join(a.name for a in servers)}) in {st.kube_dir}")
    for api in servers:
        step(f"  kubectl {api.name}: magw lab kubectl {api.name} --name {st.name} -- get gateways "
             f"(kubeconfig {kubectl_kubeconfig(api.socket)}, inside namespace {api.netns})")  # fmt: skip
    created = 0
    for c in lab.clusters:
        http = cluster_api(st, c.id).http()
        for obj in cluster_objects(lab, c, st.cni):
            try:
                http.create(obj)
            except KubeHttpError as exc:
                raise LabError(f"cluster {c.id}: creating {obj['kind']} {obj['metadata']['name']}: {exc}") from None
            created += 1
    step(f"control plane: {created} objects created (Nodes, Cluster, Submariner, ConfigMap{_gn(lab)})")
    return start_kubelets(lab, st, step)


def kubelet_argv(st: LabState, cluster: str) -> list[str]:
    api = cluster_api(st, cluster)
    return [sys.executable, "-m", "magw.lab.kubelet", "--lab", st.name, "--cluster", cluster,
            "--socket", str(api.socket), "--pod-logs", str(api.pod_logs)]  # fmt: skip


def start_kubelets(lab: LabLayout, st: LabState, step: Progress) -> LabState:
    """A lab kubelet per cluster (``magw.lab.kubelet``): the Pods created through the API run as processes in lab
    namespaces. Not with ``--cni ovn`` (its pods are ports of OVN's switches, which the kubelet does not wire)."""
    if st.ovn:
        step("kubelets: none (--cni ovn: pods created through the API are not run)")
        return st
    for c in lab.clusters:
        api = cluster_api(st, c.id)
        api.pod_logs.mkdir(parents=True, exist_ok=True)
        rec = procs.start(kind=KUBELET, owner=c.id, namespace=c.underlay_ns, argv=kubelet_argv(st, c.id),
                          log_path=st.logs_dir / f"kubelet-{c.id}.log")  # fmt: skip
        st = state.add_process(st, rec)
    step(f"kubelets: {len(lab.clusters)} started (pods created through the API run in lab namespaces)")
    return st


def _gn(lab: LabLayout) -> str:
    return ", workloads and Globalnet objects" if lab.topology.globalnet else ""
