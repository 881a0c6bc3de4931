"""``up`` and ``down``: build a lab's namespaces, network, servers and daemons; remove all of it.

``up`` records every namespace (and a random token) in the state file before
creating any, marks every namespace it creates with ``naming.marker(lab, token)``
on its ``lo``, and on any failure (including Ctrl-C) calls ``down`` before
re-raising, so a failed ``up`` leaves nothing behind but a copy of its files
(logs, status files) under the temp dir, which it names (``kept``). ``down``
removes only the namespaces that carry the lab's marker (see ``ownership``), whether the state
file records them or not (a crash may have lost it), and stops only the recorded
processes and those inside its own namespaces. A namespace that merely has the
lab's prefix is left alone, and reported.
"""

from __future__ import annotations

import secrets
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs
import structlog

from magw.lab.build import builds, kept, netns, ownership, procs, services, state, wiring
from magw.lab.build import cloud as lab_cloud
from magw.lab.build.pool import parallel
from magw.lab.build.ready import wait_local
from magw.lab.build.state import LabState
from magw.lab.errors import LabError, LabInputError
from magw.lab.planes import daemons as lab_daemons
from magw.lab.planes import egressgw as lab_egressgw
from magw.lab.planes import ovn as lab_ovn
from magw.lab.planes import ovn_nodes as lab_ovn_nodes
from magw.lab.planes import readiness
from magw.lab.spec import naming
from magw.lab.spec.layout import ECHO_PORT, LabLayout, layout
from magw.lab.spec.topology import Topology
from magw.lab.verify.connectivity import traffic_argv

log = structlog.get_logger(__name__)

Progress = Callable[[str], None]


def _quiet(_line: str) -> None:
    return None


@attrs.frozen(kw_only=True)
class DownReport:
    name: str
    namespaces: tuple[str, ...]
    processes: dict[int, str]
    state_removed: bool
    left_alone: tuple[tuple[str, str], ...] = ()  # (namespace with the lab's prefix, why it is not ours)
    kept: Path | None = None  # where the lab's files were copied before they were removed (``keep``)


def check_free(name: str) -> None:
    """Refuse (LabError, one line) a lab that exists (state directory or marked namespace), or whose prefix a
    namespace it did not make uses: mixing with a bystander is the one thing ``down`` could not sort out."""
    found = ownership.survey(name, None)
    if naming.state_dir(name).exists() or found.ours:
        raise LabError(f"lab {name!r} already exists (remove it with: magw lab down --name {name})")
    if found.bystanders:
        names = ", ".join(ns for ns, _why in found.bystanders)
        what = "namespace {} has" if len(found.bystanders) == 1 else "namespaces {} have"
        raise LabError(
            f"lab {name!r}: {what.format(names)} the lab's prefix {naming.ns_prefix(name)!r} but was not made "
            f"by it; remove it or pick another --name"
        )


def up(
    topology: Topology,
    *,
    name: str = naming.DEFAULT_LAB_NAME,
    daemons: bool = True,
    wait_timeout: float = 60.0,
    progress: Progress = _quiet,
    remote_wait: bool = True,
    control_plane: str = "file",
    cni: str = "generic",
    daemons_from: str = "",
) -> LabState:
    """Build lab ``name``; on any failure remove what was built and re-raise.

    ``daemons_from``: a magw source tree (checked with ``builds.check_tree``) the daemons run from instead of the
    installed magw (``magw.lab.build.builds``).

    ``control_plane``: what feeds the daemons, ``file`` (the file broker) or ``kube`` (API server emulators,
    ``magw.lab.planes.kube``). ``cni``: ``generic`` (the lab's host-gw CNI) or ``ovn`` (plus an OVN control plane and
    syncer per cluster, ``magw.lab.planes.ovn``; only with the file broker).

    ``remote_wait=False`` skips only the last wait, until pods reach the other clusters (everything the daemons
    must have published and allocated is still waited for): for labs whose inter-cluster datapath is under test.
    """
    lab = layout(name, topology)
    if cni == "ovn":
        lab_ovn.check_supported(lab, control_plane)
        if topology.load_balancer is not None:
            raise LabInputError("load_balancer: not with --cni ovn yet (docs/load-balancer.md)")
    if daemons_from:
        daemons_from = builds.check_tree(daemons_from)
    check_free(name)
    _claim_state_dir(name)
    started = time.monotonic()

    def step(text: str) -> None:
        progress(f"[{time.monotonic() - started:5.1f}s] {text}")

    token = secrets.token_hex(8)
    st = LabState(
        name=name,
        topology=topology,
        phase="building",
        daemons=daemons,
        token=token,
        namespaces=lab.namespaces,
        control_plane=control_plane,
        cni=cni,
    )
    try:
        st.logs_dir.mkdir()
        state.write(st)
        build_network(lab, step, marker=naming.marker(name, token), ovn=cni == "ovn")
        st = attrs.evolve(st, processes=start_echo_servers(lab, st))
        state.write(st)
        step(f"echo servers: {len(lab.pods)} started (port {ECHO_PORT})")
        if daemons:
            st = lab_daemons.start_all(lab, st, step, daemons_from)
            state.write(st)
            readiness.wait_ready(lab, st, step, timeout=wait_timeout, remote=remote_wait)
            if topology.load_balancer is not None:  # once the gateways answer: a cloud checks registered targets
                st = attrs.evolve(st, processes=lab_cloud.start_checkers(lab, st, lab_daemons.GATEWAY_METRICS_PORT))
                state.write(st)
                step(f"cloud: health checks every {topology.load_balancer.health_interval:g} s")
        else:
            wait_local(lab, step, timeout=wait_timeout)
        st = attrs.evolve(st, phase="up")
        state.write(st)
        step(f"lab {name} is up")
        log.info("lab.up_done", name=name, namespaces=len(lab.namespaces), processes=len(st.processes))
        return st
    except BaseException as exc:
        log.info("lab.up_failed", name=name, error=str(exc), error_type=type(exc).__name__)
        progress(f"{failed_line(exc)}; removing lab {name}")
        report = down(name, keep=kept.kept_dir(name))
        if report.kept is None:
            raise
        progress(f"lab {name}'s logs and status files are kept in {report.kept}")
        if isinstance(exc, LabError):  # its paths ("see .../logs") point into the state directory, gone now
            raise LabError(kept.repoint(str(exc), naming.state_dir(name), report.kept)) from exc
        raise


def failed_line(exc: BaseException) -> str:
    """How an ``up`` ended, in words: a KeyboardInterrupt (SIGINT: Ctrl-C, or a wrapper's time limit) has no
    message of its own, so it says "interrupted" rather than "(KeyboardInterrupt: )"."""
    if isinstance(exc, KeyboardInterrupt):
        return "up interrupted (SIGINT)"
    return f"up failed ({type(exc).__name__}: {exc})" if str(exc) else f"up failed ({type(exc).__name__})"


def _claim_state_dir(name: str) -> None:
    """Create the lab's state directory; it is the lock against a second ``up`` of the same name."""
    naming.STATE_ROOT.mkdir(parents=True, exist_ok=True)
    try:
        naming.state_dir(name).mkdir()
    except FileExistsError:
        raise LabError(f"lab {name!r} already exists (remove it with: magw lab down --name {name})") from None


def build_network(lab: LabLayout, step: Progress, *, marker: str, ovn: bool = False) -> None:
    """Namespaces (each marked ``marker``), bridges, veths, addresses, routes, nft tables, optional WAN shaping.

    ``ovn`` (``--cni ovn``): the nodes get no cni0, no pod routes and no lab-kube/lab-cni tables (OVN carries
    pods' packets and balances services: ``magw.lab.planes.ovn_nodes`` finishes the nodes once their Open vSwitch
    runs), and every pod's interface has checksum offload off (``magw.lab.planes.ovn_nodes.offload_off_argv``)."""
    parallel(_make_namespace, ((ns, lab, marker) for ns in lab.namespaces))
    step(f"namespaces: {len(lab.namespaces)} created")
    mtu = lab.topology.underlay_mtu
    for ns in (lab.wan_ns, *(c.underlay_ns for c in lab.clusters)):
        netns.ip_batch(ns, wiring.bridge_commands(mtu))
    nodes = ((n.namespace, wiring.node_commands(lab, c, n, ovn=ovn)) for c in lab.clusters for n in c.nodes)
    parallel(netns.ip_batch, nodes)
    for c in lab.clusters:
        if c.cloud is not None:
            netns.ip_batch(c.cloud.namespace, lab_cloud.link_commands(lab, c, c.cloud))
    netns.ip_batch(lab.wan_ns, wiring.port_commands(wiring.wan_ports(lab)))
    for c in lab.clusters:
        netns.ip_batch(c.underlay_ns, wiring.port_commands(wiring.underlay_ports(c, ovn=ovn)))
    outside = lab_egressgw.outside_ns(lab)
    if outside is not None:
        netns.ip_batch(outside, lab_egressgw.outside_commands(lab))
        netns.ip_batch(lab_egressgw.cluster_of(lab).underlay_ns, wiring.port_commands([lab_egressgw.OUTSIDE_PORT]))
    pods = ((p.namespace, wiring.pod_commands(p, lab.node(p.node))) for p in lab.pods)
    parallel(netns.ip_batch, pods)
    if ovn:
        parallel(netns.run, ((lab_ovn_nodes.offload_off_argv(p.namespace, naming.POD_IF),) for p in lab.pods))
    step(f"network: {len(lab.clusters)} underlays, {len(lab.gateways)} gateways on the WAN, {len(lab.pods)} pods")
    if not ovn:
        parallel(netns.nft_load, ((n.namespace, services.node_script(c)) for c in lab.clusters for n in c.nodes))
        step("nft: lab-kube (ClusterIP DNAT) and lab-cni (masquerade) on every node")
    for c in lab.clusters:
        if c.cloud is not None:
            netns.nft_load(c.cloud.namespace, lab_cloud.nft_script(lab, c, c.cloud))
    if any(c.cloud is not None for c in lab.clusters):
        step("cloud: a load balancer (a port per gateway) and a port-rewriting NAT in front of each cluster")
    if lab.topology.wan_rate is not None:
        for gw in lab.gateways:
            netns.run(wiring.tbf_argv(gw.namespace, lab.topology.wan_rate))
        step(f"wan: tbf {lab.topology.wan_rate} on every gateway's {naming.WAN_IF}")


def _make_namespace(ns: str, lab: LabLayout, marker: str) -> None:
    netns.add_namespace(ns, lo_alias=marker)
    node = next((n for n in lab.nodes if n.namespace == ns), None)
    cloud = any(c.cloud is not None and c.cloud.namespace == ns for c in lab.clusters)
    netns.sysctl(ns, wiring.NODE_SYSCTLS if node is not None or cloud else wiring.BASE_SYSCTLS)


def start_echo_servers(lab: LabLayout, st: LabState) -> tuple[procs.ProcRecord, ...]:
    """An echo server (TCP+UDP, ECHO_PORT) in every pod; returns the state's processes plus these."""
    records = list(st.processes)
    for pod in lab.pods:
        argv = traffic_argv("serve", "--name", pod.name, "--port", str(ECHO_PORT))
        log_path = st.logs_dir / f"echo-{pod.name}.log"
        records.append(procs.start(kind="echo", owner=pod.name, namespace=pod.namespace, argv=argv, log_path=log_path))
    outside = lab_egressgw.outside_ns(lab)
    if outside is not None:  # the egress lab's server outside the cluster (magw.lab.planes.egressgw)
        name = lab_egressgw.OUTSIDE_NAME
        argv = traffic_argv("serve", "--name", name, "--port", str(ECHO_PORT))
        log_path = st.logs_dir / f"echo-{name}.log"
        records.append(procs.start(kind="echo", owner=name, namespace=outside, argv=argv, log_path=log_path))
    return tuple(records)


def down(name: str, *, grace: float = procs.STOP_GRACE, keep: Path | None = None) -> DownReport:
    """Remove the processes, namespaces and files of lab ``name`` that it made, and nothing else. Idempotent.

    Namespaces go only if they carry the lab's marker; a namespace that merely has
    the lab's prefix, and every process in it, is left alone and reported. ``keep``: copy the lab's files
    there (``kept.keep_files``) once its processes are stopped, before they are removed.
    """
    naming.check_lab_name(name)
    try:
        st = state.read(name)
    except LabError as exc:
        log.warning("lab.state_unreadable", name=name, error=str(exc))
        st = None
    stopped = procs.stop(st.processes, grace=grace) if st is not None else {}
    found = ownership.survey(name, st)
    for ns, why in found.bystanders:
        log.warning("lab.down_left_alone", name=name, namespace=ns, reason=why)
    stopped.update(stop_namespace_processes(found.ours, grace))
    deleted = tuple(ns for ns in found.ours if netns.delete_namespace(ns))
    state_dir = naming.state_dir(name)
    removed = state_dir.exists()
    copied = kept.keep_files(state_dir, keep) if keep is not None and removed else 0
    shutil.rmtree(state_dir, ignore_errors=True)
    log.info(
        "lab.down_done", name=name, namespaces=len(deleted), processes=len(stopped), left_alone=len(found.bystanders)
    )
    return DownReport(
        name=name,
        namespaces=deleted,
        processes=stopped,
        state_removed=removed,
        left_alone=found.bystanders,
        kept=keep if copied else None,
    )


def stop_namespace_processes(namespaces: Iterable[str], grace: float) -> dict[int, str]:
    """Stop whatever still runs inside the lab's own (marked) namespaces, e.g. started with ``magw lab exec``."""
    targets = []
    for ns in namespaces:
        for pid in netns.namespace_pids(ns):
            ticks = procs.start_ticks(pid)
            if ticks is not None:
                targets.append((pid, ticks))
    return procs.stop_pids(targets, grace=grace) if targets else {}
