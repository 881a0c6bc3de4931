"""``magw lab add-gateway`` and ``remove-gateway``: a new gateway node joins a running lab, and leaves it again.

Adding is what an operator does to a real cluster: a new node comes up and gets the gateway label. Here: the
cluster's ``added_gateways`` grows by one in the lab's topology (``magw.lab.spec.layout`` lays added gateways
out after the workers and gives them no pods, so nothing laid out before moves), the node's namespace is made
and wired like ``up`` wires a gateway (underlay, WAN, the cluster's lab-kube and lab-cni tables, a route to its
pod subnet on every other node of its cluster), its Node is published (the broker's document, or the Node object
with the gateway label in the cluster's API server) and its route agent and gateway daemon start. Then it waits
until the gateway's Endpoint is published everywhere, (Globalnet) its cluster egress IPs are allocated, every
route agent converged, and every worker of its cluster and every remote gateway probes it as up.

The state file records the new topology and the namespace before anything is made, so ``down`` removes what a
failed add made; a failed add also takes out what it made at once and puts the topology back.

Removing (only the last added gateway of a cluster, so the layout stays a function of the count) drains first, as
taking a node's gateway label does: its gateway daemon stops and its Endpoint and Node go (every route agent plans
without it) while its route agent's datapath still forwards, until no node probes it (at most ``DRAIN_TIMEOUT``);
then its other daemons stop, its namespace (only if it carries this lab's marker) and the routes to it go, and the
topology shrinks by one.

On a ``--cni ovn`` lab the node also becomes an OVN node before its daemons start: its Open vSwitch, its rows in
the cluster's NB, its bridges and its ovn-controller's chassis (``magw.lab.planes.ovn_grow``); removing deletes
them after its processes stopped.

Not supported (refused with one line): ``load_balancer`` (the cloud's listener and NAT are made per gateway at
``up``), a lab without daemons.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator

import attrs
import structlog

from magw.lab.build import lifecycle, netns, procs, services, state, wiring
from magw.lab.build.state import LabState
from magw.lab.errors import LabError, LabInputError
from magw.lab.planes import daemons, egressgw_daemons, kube, kube_objects, ovn_grow, ovn_nodes, readiness
from magw.lab.planes.kube_http import KubeHttpError, object_path
from magw.lab.spec import naming
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout, layout
from magw.lab.spec.topology import Topology, parse_topology
from magw.sources.file.endpoint_files import withdraw_endpoint
from magw.sources.kube.mapping import endpoint_object_name

log = structlog.get_logger(__name__)

Progress = Callable[[str], None]
DRAIN_TIMEOUT = 5.0  # seconds remove-gateway waits for the peers to stop using the node before it goes
GROW_LOCK = "grow.lock"  # in the lab's state directory (removed with it by down)
DAEMON_KINDS = ("route-agent", "gateway", egressgw_daemons.AGENT_KIND)
NODE_KINDS = (*DAEMON_KINDS, *ovn_nodes.OVS_KINDS)  # a node's processes (the OVS kinds on --cni ovn labs)


def _quiet(_line: str) -> None:
    return None


@contextlib.contextmanager
def _exclusive(name: str, verb: str) -> Iterator[None]:
    """One add-gateway or remove-gateway at a time per lab: each reads, changes and writes the state's topology."""
    path = naming.state_dir(name) / GROW_LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:
        raise LabInputError(f"{verb}: {state.no_lab_line(name)}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabError(f"another add-gateway or remove-gateway is running on lab {name}") from None
        yield
    finally:
        os.close(fd)  # releases the lock


def add_gateway(name: str, cluster: str, *, timeout: float = 60.0, progress: Progress = _quiet) -> NodeLayout:
    """Add a gateway node to cluster ``cluster`` of the running lab ``name``; returns its layout once it carries
    traffic (see the module). On any failure (Ctrl-C included) what it made is taken out again and the error
    re-raised."""
    with _exclusive(name, "add-gateway"):
        return _add(name, cluster, timeout, progress)


def remove_gateway(name: str, node_name: str, *, progress: Progress = _quiet) -> NodeLayout:
    """Remove an added gateway (the last one of its cluster) from the running lab ``name`` (see the module)."""
    with _exclusive(name, "remove-gateway"):
        return _remove(name, node_name, progress)


def _add(name: str, cluster: str, timeout: float, progress: Progress) -> NodeLayout:
    started = time.monotonic()

    def step(text: str) -> None:
        progress(f"[{time.monotonic() - started:5.1f}s] {text}")

    st = _require(name, "add-gateway")
    topology = _resized(st.topology, cluster, +1, "add-gateway")
    lab = layout(name, topology)
    c = lab.cluster(cluster)
    node = c.gateways[-1]
    before = st
    st = attrs.evolve(st, topology=topology, namespaces=(*st.namespaces, node.namespace))
    state.write(st)  # first: a crash from here on leaves a record that down (or remove-gateway) acts on
    log.info("lab.add_gateway", name=name, cluster=cluster, node=node.name)
    try:
        _wire(lab, c, node, naming.marker(name, st.token), ovn=st.ovn)
        step(f"{node.name}: namespace {node.namespace}, underlay {node.node_ip}, WAN {node.wan_ip}, pod subnet "
             f"{node.pod_subnet} (no pods)")  # fmt: skip
        if st.ovn:
            st = ovn_grow.add_node(lab, st, c, node, step, time.monotonic() + timeout)
        _publish(st, lab, node)
        step(f"{node.name}: Node published with the gateway label ({'API server' if st.kube else 'broker'})")
        daemons.node_state_dir(st, node).mkdir(mode=0o700, parents=True, exist_ok=True)
        build = _build_of(st, c)
        for kind, argv in (("route-agent", daemons.route_agent_argv(st, node)),
                           ("gateway", daemons.gateway_argv(st, node, build))):  # fmt: skip
            st = state.add_process(st, daemons.start_daemon(st, node, kind, argv, build))
        egress = st.topology.egressgw
        egress_agent = egress is not None and egress.cluster == cluster  # up starts one on every node there
        if egress_agent:
            st = state.add_process(st, egressgw_daemons.start_agent(st, node, daemons.script, build))
        step(f"{node.name}: route agent and gateway daemon started"
             + (", and an egress agent (no VIP's candidate)" if egress_agent else ""))
        readiness.wait_ready(lab, st, step, timeout=timeout, remote=False)
        _wait_probed(lab, st, node, step, time.monotonic() + timeout)
    except BaseException as exc:
        log.info("lab.add_gateway_failed", name=name, node=node.name, error=str(exc), error_type=type(exc).__name__)
        progress(f"add-gateway failed ({type(exc).__name__}: {exc}); taking {node.name} out again")
        st = state.read(name) or st  # every process started is recorded there at once (state.add_process)
        _take_out(st, lab, node, drain=False)
        state.write(attrs.evolve(before, processes=_without(st.processes, node)))
        raise
    step(f"{node.name} is a gateway of {cluster}")
    log.info("lab.add_gateway_done", name=name, node=node.name, seconds=round(time.monotonic() - started, 2))
    return node


def _remove(name: str, node_name: str, progress: Progress) -> NodeLayout:
    st = _require(name, "remove-gateway")
    lab = layout(name, st.topology)
    node = next((n for n in lab.nodes if n.name == node_name), None)
    added = [n.name for c in lab.clusters for n in c.gateways[len(c.gateways) - _added(st.topology, c.id):]]
    if node is None or node.name not in added:
        what = f"an added gateway (added: {', '.join(added)})" if added else "an added gateway (none was added)"
        raise LabInputError(f"remove-gateway: NODE: {node_name!r} is not {what}")
    last = lab.cluster(node.cluster).gateways[-1]
    if last.name != node.name:
        raise LabInputError(f"remove-gateway: NODE: {node_name!r}: remove {last.name} first (the last added "
                            f"gateway of {node.cluster} goes first)")  # fmt: skip
    log.info("lab.remove_gateway", name=name, node=node.name)
    done = _take_out(st, lab, node, drain=True)
    topology = _resized(st.topology, node.cluster, -1, "remove-gateway")
    namespaces = tuple(ns for ns in st.namespaces if ns != node.namespace)
    state.write(attrs.evolve(st, topology=topology, namespaces=namespaces, processes=_without(st.processes, node)))
    progress(f"{node.name}: {'; '.join(done)}")
    log.info("lab.remove_gateway_done", name=name, node=node.name, done=done)
    return node


def next_gateway(topology: Topology, cluster: str) -> str:
    """The name the next gateway added to ``cluster`` gets (``east-gw3`` after two gateways)."""
    spec = next(c for c in topology.clusters if c.id == cluster)
    return naming.node_name(cluster, f"gw{spec.gateways + spec.added_gateways + 1}")


def _require(name: str, verb: str) -> LabState:
    st = state.require_with_daemons(name, verb)
    if st.topology.load_balancer is not None:
        raise LabInputError(f"{verb}: not behind a load_balancer (the cloud's listener and NAT are made per gateway "
                            "at up)")  # fmt: skip
    return st


def _added(topology: Topology, cluster: str) -> int:
    return next(c.added_gateways for c in topology.clusters if c.id == cluster)


def _resized(topology: Topology, cluster: str, by: int, verb: str) -> Topology:
    """``topology`` with ``cluster``'s ``added_gateways`` changed by ``by``, checked as a topology file is."""
    ids = [c.id for c in topology.clusters]
    if cluster not in ids:
        raise LabInputError(f"{verb}: --cluster: {cluster!r} is not a cluster of the lab (clusters: {', '.join(ids)})")
    clusters = tuple(attrs.evolve(c, added_gateways=c.added_gateways + by) if c.id == cluster else c
                     for c in topology.clusters)  # fmt: skip
    try:
        return parse_topology(attrs.evolve(topology, clusters=clusters).to_doc(), source=f"{verb} {cluster}")
    except LabInputError as exc:
        raise LabInputError(f"{verb}: cluster {cluster} cannot take another gateway ({exc})") from None


def _build_of(st: LabState, c: ClusterLayout) -> str:
    """The build the cluster's route agents run from (``magw lab up --daemons-from``, ``upgrade``): the new node's
    daemons run from it too."""
    return next((r.build for r in st.processes if r.kind == "route-agent" and r.owner in {n.name for n in c.nodes}),
                "")  # fmt: skip


def _wire(lab: LabLayout, c: ClusterLayout, node: NodeLayout, marker: str, *, ovn: bool) -> None:
    """The node's namespace and links as ``up`` makes a gateway's (``magw.lab.build.lifecycle.build_network``);
    ``ovn``: its second underlay leg, and no pod routes or lab-kube/lab-cni tables (OVN carries pods' packets)."""
    netns.add_namespace(node.namespace, lo_alias=marker)
    netns.sysctl(node.namespace, wiring.NODE_SYSCTLS)
    netns.ip_batch(node.namespace, wiring.node_commands(lab, c, node, ovn=ovn))
    ports = [naming.underlay_port(node.short), *([naming.encap_port(node.short)] if ovn else [])]
    netns.ip_batch(c.underlay_ns, wiring.port_commands(ports))
    if node.wan_ip is not None:
        netns.ip_batch(lab.wan_ns, wiring.port_commands([naming.wan_port(c.id, node.short)]))
    if not ovn:
        for other in c.nodes:
            if other.name != node.name:
                netns.ip_batch(other.namespace, [_pod_route(node)])
        netns.nft_load(node.namespace, services.node_script(c))
    if lab.topology.wan_rate is not None:
        netns.run(wiring.tbf_argv(node.namespace, lab.topology.wan_rate))


def _pod_route(node: NodeLayout) -> str:
    """The lab CNI's route on the cluster's other nodes to ``node``'s pod subnet (``wiring.node_commands``)."""
    return f"route add {node.pod_subnet} via {node.node_ip} dev {naming.UNDERLAY_IF}"


def _publish(st: LabState, lab: LabLayout, node: NodeLayout) -> None:
    if st.kube:
        try:
            kube.cluster_api(st, node.cluster).http().create(kube_objects.node_object(node))
        except KubeHttpError as exc:
            raise LabError(f"{node.name}: creating its Node: {exc}") from None
        return
    doc = daemons.node_document(node, st.cni, client_ip=daemons.keeps_client_ip(lab, st.cni))
    daemons.write_document(st.broker_dir, daemons.node_file(node), doc)


def _unpublish(st: LabState, node: NodeLayout) -> str:
    """Withdraw the gateway's Endpoint (what ``magw-gateway --withdraw-on-exit`` does; on the kube control plane
    the gateways' broker sync then deletes the copies, and its released Lease goes too) and delete its Node; what
    was done, in words."""
    if not st.kube:
        gone = withdraw_endpoint(st.broker_dir, node.cluster, node.name)
        with contextlib.suppress(FileNotFoundError):
            (st.broker_dir / daemons.node_file(node)).unlink()
        return f"{'Endpoint withdrawn' if gone else 'no Endpoint'}, Node document deleted"
    from magw.sources.kube.lease import gateway_lease_name  # kubernetes-asyncio: only for a kube lab

    api = kube.cluster_api(st, node.cluster)
    done = []
    for obj, what in (
        ({"kind": "Endpoint", "metadata": {"namespace": api.namespace,
                                           "name": endpoint_object_name(node.cluster, node.name)}}, "Endpoint"),
        ({"kind": "Lease", "metadata": {"namespace": api.namespace, "name": gateway_lease_name(node.name)}}, "Lease"),
        ({"kind": "Node", "metadata": {"name": node.name}}, "Node"),
    ):  # fmt: skip
        try:
            api.http().request("DELETE", object_path(obj))
            done.append(f"{what} deleted")
        except KubeHttpError as exc:
            if " 404 " not in str(exc):
                raise LabError(f"{node.name}: deleting its {what}: {exc}") from None
            done.append(f"no {what}")
    return ", ".join(done)


def _take_out(st: LabState, lab: LabLayout, node: NodeLayout, *, drain: bool) -> list[str]:
    """Take the node out: its gateway daemon stopped and its Endpoint and Node unpublished first, then (``drain``,
    for remove-gateway) a wait of at most ``DRAIN_TIMEOUT`` s until no other node probes it, while its datapath
    (its route agent's kernel objects, its cable) still forwards what its peers send until they move their flows
    away, as when an operator takes a node's gateway label; then its other daemons stopped, its namespace removed
    (only with this lab's marker), the routes to it (on OVN: its NB rows, SB chassis and Open vSwitch directory) and
    its state files. Best effort past a failed step: every step is tried. What was done, in words."""
    mine = [r for r in st.processes if r.owner == node.name and r.kind in NODE_KINDS]
    stopped = procs.stop([r for r in mine if r.kind == "gateway"])
    steps: list[tuple[str, Callable[[], str]]] = [("unpublish", lambda: _unpublish(st, node))]
    if drain:
        steps.append(("drain", lambda: _drain(lab, st, node, time.monotonic() + DRAIN_TIMEOUT)))
    done = _each(node, steps)
    stopped |= procs.stop([r for r in mine if r.kind != "gateway"])
    after: list[tuple[str, Callable[[], str]]] = [("namespace", lambda: _remove_namespace(st, node))]
    if st.ovn:
        after.append(("ovn", lambda: ovn_grow.remove_node(st, lab.cluster(node.cluster), node)))
    else:
        after.append(("routes", lambda: _remove_routes(lab, node)))
    done += _each(node, after)
    shutil.rmtree(daemons.node_state_dir(st, node), ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        daemons.agent_status_path(st, node).unlink()
    return [f"{len(stopped)} daemons stopped", *done]


def _each(node: NodeLayout, steps: list[tuple[str, Callable[[], str]]]) -> list[str]:
    done = []
    for what, action in steps:
        try:
            done.append(action())
        except (LabError, OSError, subprocess.SubprocessError) as exc:
            log.warning("lab.remove_gateway_step_failed", node=node.name, step=what, error=str(exc))
            done.append(f"{what} failed: {exc}")
    return done


def _drain(lab: LabLayout, st: LabState, node: NodeLayout, deadline: float) -> str:
    """Until no other node's route agent probes ``node`` (its Endpoint gone from their plans), or ``deadline``."""
    started = time.monotonic()
    while True:
        still = readiness.probing(st, lab, node.name)
        if not still:
            return f"drained: no node probes it after {time.monotonic() - started:.1f} s"
        if time.monotonic() >= deadline:
            return f"still probed after {DRAIN_TIMEOUT:g} s by {', '.join(still)} (taken out anyway)"
        time.sleep(0.1)


def _remove_namespace(st: LabState, node: NodeLayout) -> str:
    ns = node.namespace
    if not netns.exists(ns):
        return f"no namespace {ns}"
    if netns.lo_alias(ns) != naming.marker(st.name, st.token):
        raise LabError(f"namespace {ns} does not carry lab {st.name}'s marker: left alone")
    lifecycle.stop_namespace_processes([ns], procs.STOP_GRACE)  # the route agent's wireguard-go, an exec's shell
    netns.delete_namespace(ns)
    return f"namespace {ns} deleted"


def _remove_routes(lab: LabLayout, node: NodeLayout) -> str:
    c = lab.cluster(node.cluster)
    for other in c.nodes:
        if other.name != node.name:
            netns.run(["ip", "-n", other.namespace, "route", "del", str(node.pod_subnet), "via", str(node.node_ip)])
    return f"routes to {node.pod_subnet} removed"


def _without(records: tuple[procs.ProcRecord, ...], node: NodeLayout) -> tuple[procs.ProcRecord, ...]:
    return tuple(r for r in records if not (r.owner == node.name and r.kind in NODE_KINDS))


def _wait_probed(lab: LabLayout, st: LabState, node: NodeLayout, step: Progress, deadline: float) -> None:
    """Until every worker of the gateway's cluster and every remote gateway probes it, as up (a cluster's gateways
    do not probe each other)."""
    watchers = [n for n in lab.nodes if (n.cluster == node.cluster) != n.gateway]
    last = -1
    while True:
        pending = [n.name for n in watchers if not readiness.sees_up(st, n, node.name)]
        if len(pending) != last:
            step(f"{node.name}: probed as up by {len(watchers) - len(pending)}/{len(watchers)} nodes")
            last = len(pending)
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise LabError(f"{node.name}: not probed as up by {', '.join(pending)} (see {st.dir / 'status'})")
        time.sleep(0.2)
