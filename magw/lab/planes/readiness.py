"""Waiting until a lab's daemons carry traffic, and reading what the Globalnet controllers allocated.

``wait_ready`` (after ``magw.lab.planes.daemons.start_all``, and after ``magw lab add-gateway``): every gateway's
Endpoint published (the broker's file, or with ``--control-plane kube`` the object in the broker's and every
cluster's API server), with Globalnet every gateway's cluster egress IPs and every exported service's global IPs
allocated, every route agent converged, with ``--cni ovn`` the syncers synced, and (``remote``) pods reaching the
other clusters, and with an egress gateway every bound pod leaving as its VIP (``magw.lab.build.ready``). Each
wait is bounded and fails with one line naming what is missing and where the logs are; a
daemon that died meanwhile is named at once (``magw.lab.planes.daemons.check_alive``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from magw.lab.build.ready import wait_egress, wait_remote
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.observe import kube_view
from magw.lab.observe.globalview import ClusterView, Reader
from magw.lab.planes import kube
from magw.lab.planes import ovn as lab_ovn
from magw.lab.planes.daemons import agent_status, check_alive, endpoint_file
from magw.lab.spec.layout import LabLayout, NodeLayout
from magw.sources.kube.mapping import endpoint_object_name

Progress = Callable[[str], None]


def wait_ready(lab: LabLayout, st: LabState, step: Progress, *, timeout: float, remote: bool = True) -> None:
    """Wait (bounded) until every gateway has published its Endpoint, (Globalnet) the controllers allocated every
    gateway's and exported service's addresses, every route agent converged, (``remote``) pods reach the
    other clusters: by pod IP, or with Globalnet every exported ClusterIP service by its global IP, and (egress
    gateway) every bound pod leaves as its VIP."""
    deadline = time.monotonic() + timeout
    _wait_endpoints(lab, st, step, deadline)
    views = _wait_globalnet(lab, st, step, deadline) if lab.topology.globalnet else None
    _wait_converged(lab, st, step, deadline)
    if st.ovn:
        lab_ovn.wait_synced(lab, st, step, deadline, lambda: check_alive(st))
    if remote:
        wait_remote(lab, step, timeout=max(deadline - time.monotonic(), 1.0), views=views,
                    alive=lambda: check_alive(st))  # fmt: skip
    else:
        step("inter-cluster connectivity: not waited for")
    if lab.topology.egressgw is not None:
        wait_egress(lab, step, timeout=max(deadline - time.monotonic(), 1.0), alive=lambda: check_alive(st))
    check_alive(st)


def views_reader(lab: LabLayout, st: LabState) -> Reader | kube_view.KubeViewReader:
    """Reads every cluster's Globalnet allocations from the controllers' statuses in the broker (or emulators)."""
    if st.kube:
        return kube_view.KubeViewReader(lab, st)
    return Reader(st.broker_dir, {c.id: tuple(g.name for g in c.gateways) for c in lab.clusters})


def views_readable(st: LabState) -> bool:
    """True when there is something to read views from (the broker directory, or the emulators' sockets)."""
    return all(a.socket.exists() for a in kube.api_servers(st)) if st.kube else st.broker_dir.is_dir()


def read_views(lab: LabLayout, st: LabState) -> dict[str, ClusterView]:
    return views_reader(lab, st).read()


def globalnet_missing(lab: LabLayout, views: dict[str, ClusterView]) -> list[str]:
    """What the controllers have not allocated yet: a gateway's cluster egress IPs, an exported ClusterIP
    service's global IP, a global IP for each backend of an exported headless service."""
    missing = []
    for c in lab.clusters:
        view = views[c.id]
        missing += [f"{g.name} cluster egress IPs" for g in c.gateways if g.name not in view.gateway_egress]
        for s in c.services:
            if not s.export:
                continue
            if s.cluster_ip is not None and view.service_ip(s.namespace, s.name) is None:
                missing.append(f"{c.id} service {s.namespace}/{s.name} global IP")
            if s.cluster_ip is None and set(view.backend_ips(s.namespace, s.name)) != set(s.backends):
                missing.append(f"{c.id} headless service {s.namespace}/{s.name} backend global IPs")
    return missing


def _wait_globalnet(lab: LabLayout, st: LabState, step: Progress, deadline: float) -> dict[str, ClusterView]:
    last = -1
    reader = views_reader(lab, st)
    while True:
        views = reader.read()
        missing = globalnet_missing(lab, views)
        if len(missing) != last:
            step(f"globalnet: {len(missing)} allocations missing")
            last = len(missing)
        if not missing:
            return views
        check_alive(st)
        if time.monotonic() >= deadline:
            raise LabError(f"globalnet: not allocated: {', '.join(missing[:5])} (see {st.logs_dir})")
        time.sleep(0.2)


def _published(lab: LabLayout, st: LabState) -> int:
    """Gateways whose Endpoint is in place: the broker's file, or (kube) the object in the broker's emulator
    and in every cluster's (its own, where the gateway wrote it, and the others, where the broker sync put it)."""
    if not st.kube:
        return sum(1 for gw in lab.gateways if endpoint_file(st.broker_dir, gw).exists())
    seen = kube_view.endpoints_everywhere(st)
    names = [endpoint_object_name(gw.cluster, gw.name) for gw in lab.gateways]
    return sum(1 for name in names if all(name in held for held in seen.values()))


def _wait_endpoints(lab: LabLayout, st: LabState, step: Progress, deadline: float) -> None:
    last = -1
    what = "in the broker and every cluster" if st.kube else "published"
    while True:
        published = _published(lab, st)
        if published != last:
            step(f"endpoints: {published}/{len(lab.gateways)} gateways {what}")
            last = published
        if published == len(lab.gateways):
            return
        check_alive(st)
        if time.monotonic() >= deadline:
            raise LabError(f"endpoints: only {published}/{len(lab.gateways)} gateways {what} (see {st.logs_dir})")
        time.sleep(0.2)


def _wait_converged(lab: LabLayout, st: LabState, step: Progress, deadline: float) -> None:
    """Until every route agent's status file says it converged (all planned objects applied)."""
    last = -1
    while True:
        pending = [n.name for n in lab.nodes if (agent_status(st, n) or {}).get("converged") is not True]
        done = len(lab.nodes) - len(pending)
        if done != last:
            step(f"route agents: {done}/{len(lab.nodes)} converged")
            last = done
        if not pending:
            return
        check_alive(st)
        if time.monotonic() >= deadline:
            raise LabError(f"route agents not converged: {', '.join(pending)} (see {st.dir / 'status'})")
        time.sleep(0.2)


def probed_peers(st: LabState, watcher: NodeLayout) -> list[dict[str, object]]:
    """The peers ``watcher``'s route agent probes, from its status file (``health.peers``)."""
    peers = ((agent_status(st, watcher) or {}).get("health") or {}).get("peers") or []
    return [p for p in peers if isinstance(p, dict)]


def sees_up(st: LabState, watcher: NodeLayout, gateway: str) -> bool:
    """True when ``watcher``'s route agent probes ``gateway`` and calls it up."""
    return any(p.get("hostname") == gateway and p.get("state") == "up" for p in probed_peers(st, watcher))


def probing(st: LabState, lab: LabLayout, gateway: str) -> list[str]:
    """The lab's other nodes whose route agent still lists ``gateway`` among the peers it probes."""
    return [n.name for n in lab.nodes
            if n.name != gateway and any(p.get("hostname") == gateway for p in probed_peers(st, n))]  # fmt: skip
