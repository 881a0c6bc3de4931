"""``magw verify --lab NAME``: the connectivity suite, run from inside a lab's pods.

1. Reachability (``magw.lab.verify.connectivity``, the lab's own probe tool): from every chosen client pod, to a
   pod and to a Service of every other cluster, over TCP and UDP; by pod IP and ClusterIP, or with Globalnet by
   their global IPs. A pod target passes when it answered and saw the client's own IP (with Globalnet: an
   address of the client cluster's global CIDR); a Service target when it answered (the serving cluster's
   gateway may SNAT it, by design).
2. Every gateway: per ordered pair of clusters, one traced stream of many UDP flows (``magw.ops.verify.trace``)
   from a client pod to a remote pod; every gateway of both clusters must carry some and lose none
   (``magw.ops.verify.gateways``).
3. Every failing probe of step 1 is traced too, and its row names the hop where it died.

On an OVN lab steps 2 and 3 give way to ``magw lab verify``'s checks (``magw.lab.verify.ovn``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from ipaddress import IPv4Address

import attrs

from magw.lab.spec.layout import ECHO_PORT, PodLayout, ServiceLayout
from magw.lab.verify.check import Check
from magw.lab.verify.connectivity import TrafficTarget, probe_many
from magw.ops.verify import gateways, hops, trace
from magw.ops.verify.labref import Addressing, Lab

PROTOS = ("tcp", "udp")
TRACE_FLOWS = 4
RETRY_PAUSE = 0.5  # seconds between the first round and the second try of the failed cells


@attrs.frozen(kw_only=True)
class Cell:
    """One probe: client pod, target (a remote pod or Service), protocol, and what came of it."""

    client: PodLayout
    kind: str  # "pod" or "service"
    target: str
    cluster: str  # the target's cluster
    ip: IPv4Address | None
    via: str
    proto: str
    servers: tuple[PodLayout, ...]  # the pods that may answer (the pod, or the Service's backends)
    port: int = ECHO_PORT  # the pod's echo server, or the Service's port
    ok: bool = False
    detail: str = ""
    hop: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "check": self.kind,
            "client": self.client.name,
            "target": self.target,
            "address": str(self.ip) if self.ip else None,
            "via": self.via,
            "proto": self.proto,
            "ok": self.ok,
            "detail": self.detail,
            "hop": self.hop,
        }


def plan(lab: Lab, addressing: Addressing, clients: Sequence[PodLayout]) -> list[Cell]:
    """The probes: per client, per other cluster, a pod (rotating with the client, so every remote node is hit)
    and the first Service with backends, each over TCP and UDP."""
    cells = []
    for i, client in enumerate(clients):
        for remote in lab.layout.clusters:
            if remote.id == client.cluster:
                continue
            pods = list(remote.pods[i % len(remote.pods) :] + remote.pods[: i % len(remote.pods)])
            found = addressing.pod_target(pods)
            for proto in PROTOS:
                if found is None:
                    cells.append(
                        Cell(
                            client=client,
                            kind="pod",
                            target=f"a {remote.id} pod",
                            cluster=remote.id,
                            ip=None,
                            via="-",
                            proto=proto,
                            servers=(),
                            detail="no pod has a global IP (no exported headless Service)",
                        )
                    )
                else:
                    pod, addr = found
                    cells.append(
                        Cell(
                            client=client,
                            kind="pod",
                            target=pod.name,
                            cluster=remote.id,
                            ip=addr.ip,
                            via=addr.via,
                            proto=proto,
                            servers=(pod,),
                        )
                    )
            svc = next((s for s in remote.services if s.backends and s.cluster_ip is not None), None)
            if svc is not None:
                cells += [_service_cell(lab, addressing, client, svc, proto) for proto in PROTOS]
    return cells


def _service_cell(lab: Lab, addressing: Addressing, client: PodLayout, svc: ServiceLayout, proto: str) -> Cell:
    addr = addressing.service(svc)
    backends = tuple(p for p in lab.layout.cluster(svc.cluster).pods if p.ip in svc.backends)
    name = f"{svc.cluster}/{svc.namespace}/{svc.name}"
    if addr is None:
        return Cell(
            client=client,
            kind="service",
            target=name,
            cluster=svc.cluster,
            ip=None,
            via="-",
            proto=proto,
            servers=backends,
            detail="no global IP (the Service is not exported)",
        )
    return Cell(
        client=client,
        kind="service",
        target=name,
        cluster=svc.cluster,
        ip=addr.ip,
        via=addr.via,
        proto=proto,
        servers=backends,
        port=svc.port,
    )


def _judge(lab: Lab, cell: Cell, ok: bool, seen_ip: str | None, error: str | None) -> Cell:
    if not ok:
        return attrs.evolve(cell, ok=False, detail=error or "no answer")
    if cell.kind == "service":
        return attrs.evolve(cell, ok=True, detail=f"answered, source seen {seen_ip}")
    if lab.globalnet:
        gcidr = lab.layout.cluster(cell.client.cluster).global_cidr
        good = gcidr is not None and seen_ip is not None and IPv4Address(seen_ip) in gcidr
        what = f"a global IP of {cell.client.cluster}" if good else f"NOT in {cell.client.cluster}'s global CIDR"
        return attrs.evolve(cell, ok=good, detail=f"source seen {seen_ip} ({what})")
    kept = seen_ip == str(cell.client.ip)
    return attrs.evolve(cell, ok=kept, detail=f"source seen {seen_ip} ({'kept' if kept else 'REWRITTEN'})")


def probe_cells(lab: Lab, cells: Sequence[Cell], *, timeout: float) -> list[Cell]:
    """Probe every cell, then once more every cell that failed (``RETRY_PAUSE`` later): a path is called broken
    when it fails twice, not for one lost connection. A cell that answered the second time passes, and its
    detail says so with the first try's error (docs/verify.md, "Second try")."""
    out = _probe_round(lab, cells, list(range(len(cells))), timeout=timeout)
    again = [i for i, c in enumerate(out) if not c.ok and c.ip is not None]
    if again:
        time.sleep(RETRY_PAUSE)
        retried = _probe_round(lab, out, again, timeout=timeout)
        for i in again:
            first, second = out[i].detail, retried[i]
            if second.ok:
                detail = f"{second.detail} (first try: {first})"
            else:
                detail = f"twice: {first}" if second.detail == first else f"twice: {first}; then {second.detail}"
            out[i] = attrs.evolve(second, detail=detail)
    return out


def _probe_round(lab: Lab, cells: Sequence[Cell], which: Sequence[int], *, timeout: float) -> list[Cell]:
    """``cells`` with those at ``which`` probed (in parallel per client namespace) and judged."""
    plan_by_ns: dict[str, list[tuple[int, TrafficTarget]]] = {}
    for i in which:
        c = cells[i]
        if c.ip is not None:
            plan_by_ns.setdefault(c.client.namespace, []).append(
                (i, TrafficTarget(proto=c.proto, ip=c.ip, port=c.port))
            )
    results = probe_many({ns: [t for _, t in items] for ns, items in plan_by_ns.items()}, timeout=timeout)
    out = list(cells)
    for ns, items in plan_by_ns.items():
        for (i, _t), r in zip(items, results[ns], strict=True):
            out[i] = _judge(lab, cells[i], r.ok, r.seen_ip, r.error)
    return out


def route_of(lab: Lab, client: PodLayout, servers: Sequence[PodLayout]) -> hops.Route:
    remote = servers[0].cluster
    return hops.route(
        client=client.name,
        client_node=client.node,
        local_gateways=[g.name for g in lab.layout.cluster(client.cluster).gateways],
        remote_gateways=[g.name for g in lab.layout.cluster(remote).gateways],
        server_nodes=sorted({p.node for p in servers}),
        servers=[p.name for p in servers],
        local=client.cluster,
        remote=remote,
    )


@attrs.frozen(kw_only=True)
class GatewayPlan:
    client: PodLayout
    server: PodLayout
    ip: IPv4Address


def gateway_plans(lab: Lab, addressing: Addressing) -> list[GatewayPlan]:
    """Per ordered pair of clusters: a client pod on a worker (else any) and a remote pod on a worker with an
    address."""
    out = []
    for a in lab.layout.clusters:
        for b in lab.layout.clusters:
            if a.id == b.id:
                continue
            found = addressing.pod_target(lab.workers_first(b.id))
            if found is not None:
                out.append(GatewayPlan(client=lab.workers_first(a.id)[0], server=found[0], ip=found[1].ip))
    return out


@attrs.frozen(kw_only=True)
class SuiteResult:
    cells: tuple[Cell, ...]
    gateways: tuple[gateways.GatewayRow, ...]
    flows: int
    ovn: tuple[Check, ...] = ()  # an OVN lab: ``magw lab verify``'s checks (ovn-trace, node state, packets)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.cells) and all(g.ok for g in self.gateways) and all(c.ok for c in self.ovn)


NOT_TRACED_OVN = (
    "not traced: on an OVN lab the pods' packets cross Open vSwitch, not the nodes' kernels (see the ovn checks)"
)


def run(lab: Lab, *, clients: Sequence[PodLayout], flows: int, timeout: float = 2.0) -> SuiteResult:
    """The suite. On an OVN lab (``--cni ovn``) the nft traces would see nothing of the pods' packets, which cross
    each node's Open vSwitch: the every-gateway check and the hop tracing give way to ``magw lab verify``'s OVN
    checks (not on a Globalnet OVN lab, whose pod IPs overlap: those checks address pods by them)."""
    addressing = Addressing(lab)
    cells = probe_cells(lab, plan(lab, addressing, clients), timeout=timeout)
    if lab.st.ovn:
        from magw.lab.verify.ovn import verify as ovn_verify

        cells = [c if c.ok or c.ip is None else attrs.evolve(c, hop=NOT_TRACED_OVN) for c in cells]
        checks = () if lab.globalnet else ovn_verify(lab.layout, lab.st).checks
        return SuiteResult(cells=tuple(cells), gateways=(), flows=0, ovn=tuple(checks))
    failing = [i for i, c in enumerate(cells) if not c.ok and c.ip is not None]
    gplans = gateway_plans(lab, addressing) if flows else []
    requests = [trace.Request(client=g.client, ip=g.ip, flows=flows) for g in gplans]
    requests += [
        trace.Request(client=cells[i].client, ip=cells[i].ip, port=cells[i].port, flows=TRACE_FLOWS)  # type: ignore[arg-type]
        for i in failing
    ]
    watch = {p.name: p for g in gplans for p in (g.client, g.server)}
    watch |= {p.name: p for i in failing for p in (cells[i].client, *cells[i].servers)}
    traced = trace.run(lab, requests, watch=list(watch.values())) if requests else []
    rows: list[gateways.GatewayRow] = []
    for g, fl in zip(gplans, traced, strict=False):
        a, b = g.client.cluster, g.server.cluster
        gws = [(n.name, a) for n in lab.layout.cluster(a).gateways] + [
            (n.name, b) for n in lab.layout.cluster(b).gateways
        ]
        rows += gateways.rows(f"{a} -> {b}", gws, fl, route_of(lab, g.client, [g.server]))
    for i, fl in zip(failing, traced[len(gplans) :], strict=True):
        cells[i] = attrs.evolve(cells[i], hop=_hop(lab, cells[i], fl))
    return SuiteResult(cells=tuple(cells), gateways=tuple(rows), flows=flows)


def _hop(lab: Lab, cell: Cell, flows: Sequence[trace.Flow]) -> str:
    """The commonest break of the traced flows, or why the trace cannot say."""
    if not cell.servers:
        return "unknown (no server pod known)"
    return gateways.hop_verdict(route_of(lab, cell.client, cell.servers), flows)
