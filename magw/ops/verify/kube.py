"""``magw verify --kubeconfig A --kubeconfig B ...``: the connectivity suite through the clusters' API servers.

Everything is a pod, created through the API: the checks' as an operator's own workload would be, the traces'
and ``--failover``'s privileged hostNetwork pods on the nodes (``kubetrace``, ``kubefailover``).

1. Each cluster: its id (the ``Submariner`` object's ``spec.clusterID`` in magw's namespace, else the kubeconfig's
   context) and, from its own ``Cluster`` object, its global CIDR when it runs Globalnet. Ids must differ.
2. Each cluster: an echo server pod (``python -m magw.lab.payload.traffic serve``, the lab's echo server, in the
   magw image) in ``--pod-namespace`` (created if missing), labelled with the run's id, and a ClusterIP Service
   over it. With Globalnet both are exported (``ServiceExport``; the pod through a headless Service of its own):
   Globalnet gives the pod a global IP (``GlobalIngressIP`` ``pod-<name>``) and the Service one (``svc-<name>``),
   which is what the other clusters reach.
3. Each ordered pair of clusters: a client pod in the first that sends one TCP request and one UDP datagram to
   the second's server pod and Service (``traffic probe``) and exits; its log is one JSON line per target.
4. A pod check passes when the server answered and saw the client pod's own IP (with Globalnet: an address of
   the client cluster's global CIDR: its egress IP); a Service check when the Service's pod answered.
5. Every gateway (``--flows N``, not 0): per ordered pair of clusters, a traced stream of N UDP flows from a node
   of the first (a worker if there is one) to the second's server pod; every gateway of both clusters must carry
   some and lose none (``gateways.rows``, as ``--lab`` mode).
6. Every failing check with an address is traced too (4 flows from the same node to its target), and its row
   names the hop where the packets died (``gateways.hop_verdict``).
7. ``--failover`` (DISRUPTIVE, asked for): one gateway's datapath cut under traffic, what moved
   (``kubefailover``).
8. Every pod, Service and ServiceExport made is deleted, also on a failure; one left behind is named.

Steps 5 and 6 enter the nodes: a privileged hostNetwork tracer pod per node counts, in a table of the run's own,
which nodes saw each traced flow (``magw.ops.verify.kubetrace``). ``--flows 0`` with every check passing makes
no such pod. A failing check also says what came back (a timeout, a refused connection, a wrong source, a pod
that never ran).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, ip_address
from typing import Any

import attrs

from magw.ops.verify import gateways, hops, kubefailover, kubetrace
from magw.ops.verify.failover import FailoverReport
from magw.ops.verify.failover import table as failover_table
from magw.ops.verify.kubeapi import KubeCallError
from magw.ops.verify.kubepods import (
    ECHO_PORT,
    Cluster,
    KubeRunError,
    Run,
    Settings,
    Target,
    close_all,
    json_objects,
    open_clusters,
    why_not_running,
)
from magw.sources.kube.client import KubeConfigError

__all__ = ["FailoverInputError", "FailoverSpec", "KubeConfigError", "KubeRunError", "Settings", "report_json", "run",
           "table"]
FailoverInputError = kubefailover.FailoverInputError
FailoverSpec = kubefailover.Spec

PROTOS = ("tcp", "udp")
TRAFFIC = ("python", "-m", "magw.lab.payload.traffic")
SERVING = '"traffic.serving"'  # the echo server's first log line, once it listens
LISTEN_LIMIT = 15.0
TRACE_FLOWS = 4  # per failing check's target


@attrs.frozen(kw_only=True)
class KubeCheck:
    kind: str  # "pod" or "service"
    client: str  # cluster/pod
    client_ip: str | None
    target: str  # cluster/pod, or cluster/service
    address: str | None
    via: str
    proto: str
    ok: bool
    detail: str
    hop: str | None = None

    def as_json(self) -> dict[str, object]:
        return {"check": self.kind, "client": self.client, "client_ip": self.client_ip, "target": self.target,
                "address": self.address, "via": self.via, "proto": self.proto, "ok": self.ok, "detail": self.detail,
                "hop": self.hop}  # fmt: skip

    def why(self) -> str:
        """What the probe saw, then where the trace says the packets died."""
        return "; ".join(x for x in (self.detail, self.hop) if x)


@attrs.frozen(kw_only=True)
class KubeResult:
    clusters: tuple[str, ...]
    checks: tuple[KubeCheck, ...]
    left_behind: tuple[str, ...]
    gateways: tuple[gateways.GatewayRow, ...] = ()
    flows: int = 0  # traced flows per pair for the every-gateway check (0: not run)
    trace_problem: str = ""  # why the streams could not be traced
    failover: FailoverReport | None = None
    failover_problem: str = ""  # why --failover could not measure

    @property
    def ok(self) -> bool:
        return (bool(self.checks) and all(c.ok for c in self.checks) and all(g.ok for g in self.gateways)
                and not self.trace_problem and not self.left_behind and not self.failover_problem
                and (self.failover is None or self.failover.ok))  # fmt: skip


async def _targets(r: Run, c: Cluster) -> list[Target]:
    """Cluster ``c``'s server pod and a ClusterIP Service over it (with Globalnet, both exported: the pod's global
    IP through a headless Service, the Service's own ``svc-<name>``); what the other clusters reach them by."""
    name, svc = f"magw-verify-server-{r.id}", f"magw-verify-svc-{r.id}"
    server = f"{c.id}/{name}"
    argv = [*TRAFFIC, "serve", "--name", server, "--port", str(ECHO_PORT), "--max-seconds", "3600"]
    await r.create_pod(c, name, "server", argv, trace_node(c) or None)  # a worker first: through a gateway both ways
    ports = [(p, ECHO_PORT) for p in PROTOS]
    created = await r.service(c, svc, ports, headless=False)
    if c.global_cidr is not None:
        await r.export(c, name, ports)
        await r.export(c, svc, ports, create_service=False)
    running = await r.pod(c, name, terminal=False)
    node = str((running.get("spec") or {}).get("nodeName") or "")
    ip, problem = await r.address(c, name, running)
    if ip is not None and not await r.wait_log(c, name, SERVING, LISTEN_LIMIT):
        ip, problem = None, f"pod {name}: its echo server did not say it listens within {LISTEN_LIMIT:g} s"
    gn = c.global_cidr is not None
    pod = Target(kind="pod", name=server, server=server, via="global IP" if gn else "pod IP", ip=ip, problem=problem,
                 node=node)  # fmt: skip
    if problem:
        return [pod, Target(kind="service", name=f"{c.id}/{svc}", server=server, via="-", problem=problem, node=node)]
    if gn:
        sip = await r.global_ip(c, f"svc-{svc}")
        why = "" if sip else f"no global IP for Service {svc} (GlobalIngressIP svc-{svc}) within {r.s.pod_timeout:g} s"
    else:
        raw = (created.get("spec") or {}).get("clusterIP")
        sip = IPv4Address(raw) if raw not in (None, "", "None") else None
        why = "" if sip else f"Service {svc} got no ClusterIP"
    return [pod, Target(kind="service", name=f"{c.id}/{svc}", server=server, via="global IP" if gn else "ClusterIP",
                        ip=sip, problem=why, node=node)]  # fmt: skip


async def _pair(r: Run, timeout: float, a: Cluster, b: Cluster, targets: Sequence[Target]) -> list[KubeCheck]:
    """One client pod in ``a`` probes each of ``b``'s targets over TCP and UDP."""
    name = f"magw-verify-{r.id}-to-{b.id}"[:63]
    client = f"{a.id}/{name}"
    reachable = [t for t in targets if t.ip is not None]
    lines: dict[str, dict[str, Any]] = {}
    client_ip, state = None, "no probe ran"
    if reachable:
        argv = [arg for t in reachable for p in PROTOS for arg in ("--target", f"{p}:{t.ip}:{ECHO_PORT}")]
        await r.create_pod(a, name, "client", [*TRAFFIC, "probe", *argv, "--timeout", f"{timeout:g}"])
        pod = await r.pod(a, name, terminal=True)
        client_ip, state = (pod.get("status") or {}).get("podIP"), why_not_running(pod)
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            lines = _lines(await r.log(a, name))
    out = []
    for t in targets:
        for p in PROTOS:
            if t.ip is None:
                ok, detail = False, t.problem or "no address"
            elif t.kind == "pod":
                ok, detail = verdict(lines.get(f"{p}:{t.ip}:{ECHO_PORT}"), client_ip, a.global_cidr, state)
            else:
                ok, detail = service_verdict(lines.get(f"{p}:{t.ip}:{ECHO_PORT}"), t.server, state)
            out.append(KubeCheck(kind=t.kind, client=client, client_ip=client_ip, target=t.name,
                                 address=str(t.ip) if t.ip else None, via=t.via, proto=p, ok=ok,
                                 detail=detail))  # fmt: skip
    return out


def _lines(text: str) -> dict[str, dict[str, Any]]:
    """The probe's JSON lines by their target (``tcp:IP:PORT``)."""
    return {doc["target"]: doc for doc in json_objects(text) if isinstance(doc.get("target"), str)}


def verdict(doc: dict[str, Any] | None, client_ip: str | None, global_cidr: IPv4Network | None,
            pod_state: str) -> tuple[bool, str]:  # fmt: skip
    """Whether one probe line of a pod target passed (the server saw the client's own IP, or with Globalnet an
    address of the client cluster's global CIDR), and what to say of it."""
    if doc is None:
        return False, f"no result in the client's log ({pod_state})"
    if not doc.get("ok"):
        return False, str(doc.get("error") or "no answer")
    seen = str(doc.get("seen_ip"))
    if global_cidr is not None:
        try:
            inside = ip_address(seen) in global_cidr
        except ValueError:
            inside = False
        if not inside:
            return False, f"answered by {doc.get('server')}, saw source {seen}: not of the global CIDR {global_cidr}"
        return True, f"answered by {doc.get('server')}, saw the global source {seen}"
    if seen != client_ip:
        return False, f"answered by {doc.get('server')}, saw source {seen}, not the client pod's {client_ip}"
    return True, f"answered by {doc.get('server')}, saw the pod's own source {seen}"


def service_verdict(doc: dict[str, Any] | None, server: str, pod_state: str) -> tuple[bool, str]:
    """A Service target passes when its backend answered (the serving cluster may SNAT the source: by design)."""
    if doc is None:
        return False, f"no result in the client's log ({pod_state})"
    if not doc.get("ok"):
        return False, str(doc.get("error") or "no answer")
    if doc.get("server") != server:
        return False, f"answered by {doc.get('server')}, not the Service's pod {server}"
    return True, f"answered by {server} (source seen: {doc.get('seen_ip')})"


def trace_node(c: Cluster) -> str:
    """Where cluster ``c``'s traced streams start: its first worker, else its first gateway ("" when no node)."""
    return (*c.workers, *c.gateways, "")[0]


def _route(a: Cluster, b: Cluster, t: Target) -> hops.Route:
    node = trace_node(a)
    return hops.node_route(client=f"the traced pod on {node}", client_node=node, local_gateways=a.gateways,
                           remote_gateways=b.gateways, server=t.server, server_node=t.node, local=a.id,
                           remote=b.id)  # fmt: skip


async def _traced(r: Run, pairs: Sequence[tuple[Cluster, Cluster, Sequence[Target]]], checks: Sequence[KubeCheck],
                  flows: int) -> tuple[list[KubeCheck], list[gateways.GatewayRow], str]:  # fmt: skip
    """Steps 5 and 6: the every-gateway rows (``flows`` per pair; 0: none) and the failing checks with their hop;
    or, when the streams could not be traced, why (the checks unchanged)."""
    failing = {(c.client.split("/", 1)[0], c.target) for c in checks if not c.ok and c.address}
    plans: list[tuple[Cluster, Cluster, Target, bool]] = []  # (client cluster, server cluster, target, gateways?)
    for a, b, targets in pairs:
        if not trace_node(a):
            continue
        plans += [(a, b, t, True) for t in targets[:1] if flows and t.ip is not None and t.node]
        plans += [(a, b, t, False) for t in targets if (a.id, t.name) in failing and t.ip is not None and t.node]
    if not plans:
        return list(checks), [], ""
    streams = [kubetrace.Stream(client=a.id, node=trace_node(a), ip=t.ip, port=ECHO_PORT,  # type: ignore[arg-type]
                                flows=flows if every else TRACE_FLOWS) for a, b, t, every in plans]  # fmt: skip
    clusters = list({id(c): c for a, b, _ in pairs for c in (a, b)}.values())
    try:
        traced = await kubetrace.run(r, clusters, streams)
    except kubetrace.TraceError as exc:
        return list(checks), [], str(exc)
    rows: list[gateways.GatewayRow] = []
    hop: dict[tuple[str, str], str] = {}
    for (a, b, t, every), fl in zip(plans, traced, strict=True):
        if every:
            gws = [(n, a.id) for n in a.gateways] + [(n, b.id) for n in b.gateways]
            rows += gateways.rows(f"{a.id} -> {b.id}", gws, fl, _route(a, b, t))
        else:
            hop[(a.id, t.name)] = gateways.hop_verdict(_route(a, b, t), fl)
    out = [attrs.evolve(c, hop=hop.get((c.client.split("/", 1)[0], c.target))) if not c.ok else c for c in checks]
    return out, rows, ""


async def _failover(r: Run, plan: kubefailover.Plan | None, spec: kubefailover.Spec | None,
                    targets: dict[str, list[Target]]) -> tuple[FailoverReport | None, str]:  # fmt: skip
    if plan is None or spec is None:
        return None, ""
    try:
        return await kubefailover.run(r, plan, spec, targets[plan.remote.id][0]), ""
    except kubetrace.TraceError as exc:
        return None, str(exc)


async def _run(kubeconfigs: Sequence[str], s: Settings, timeout: float, flows: int,
               failover: kubefailover.Spec | None = None) -> KubeResult:  # fmt: skip
    clusters = await open_clusters(kubeconfigs, s)
    try:
        plan = kubefailover.choose(clusters, failover.victim) if failover is not None else None
    except kubefailover.FailoverInputError:
        await close_all(clusters)
        raise
    r = Run(s)
    fo: FailoverReport | None = None
    fo_problem = ""
    checks: list[KubeCheck] = []
    rows: list[gateways.GatewayRow] = []
    problem = ""
    try:
        try:
            for c in clusters:
                await r.namespace(c)
            targets = await asyncio.gather(*(_targets(r, c) for c in clusters))
            pairs = [(a, b, t) for a in clusters for b, t in zip(clusters, targets, strict=True) if a is not b]
            for found in await asyncio.gather(*(_pair(r, timeout, a, b, t) for a, b, t in pairs)):
                checks += found
            checks, rows, problem = await _traced(r, pairs, checks, flows)
            fo, fo_problem = await _failover(r, plan, failover, {c.id: t for c, t in zip(clusters, targets,
                                                                                          strict=True)})
        finally:
            left = await asyncio.shield(r.cleanup())
    except KubeCallError as exc:
        raise KubeRunError(str(exc)) from None
    finally:
        await close_all(clusters)
    return KubeResult(clusters=tuple(c.id for c in clusters), checks=tuple(checks), left_behind=left,
                      gateways=tuple(rows), flows=flows if rows else 0, trace_problem=problem, failover=fo,
                      failover_problem=fo_problem)  # fmt: skip


def run(kubeconfigs: Sequence[str], settings: Settings, *, timeout: float = 2.0, flows: int = 0,
        failover: kubefailover.Spec | None = None) -> KubeResult:  # fmt: skip
    """The suite over ``kubeconfigs`` (two or more clusters), ``timeout`` seconds per probe, ``flows`` traced flows
    per pair for the every-gateway check (0: none), then ``failover`` (DISRUPTIVE) if given; ``KubeRunError`` when
    it could not run, ``FailoverInputError`` for a victim that is no gateway."""
    return asyncio.run(_run(kubeconfigs, settings, timeout, flows, failover))


def report_json(result: KubeResult) -> dict[str, Any]:
    return {"ok": result.ok, "mode": "kube", "clusters": list(result.clusters),
            "checks": [c.as_json() for c in result.checks], "gateways": [g.as_json() for g in result.gateways],
            "trace_problem": result.trace_problem or None, "failing": _failing(result),
            "failover": result.failover.as_json() if result.failover else None,
            "failover_problem": result.failover_problem or None,
            "left_behind": list(result.left_behind)}  # fmt: skip


def _failing(result: KubeResult) -> list[str]:
    out = [f"{c.client} -> {c.target} {c.proto} ({c.via} {c.address}): {c.why()}" for c in result.checks if not c.ok]
    out += [f"gateway {g.gateway} ({g.pair}): {g.text()}" for g in result.gateways if not g.ok]
    out += [f"trace: {result.trace_problem}"] if result.trace_problem else []
    out += [result.failover_problem] if result.failover_problem else []
    if result.failover is not None and not result.failover.ok:
        out.append(f"failover of {result.failover.victim}: a flow never came back, or none crossed the victim")
    return out + [f"left behind: {what}" for what in result.left_behind]


def table(result: KubeResult) -> str:
    rows = [("CLIENT", "CHECK", "TARGET", "VIA", "ADDRESS", "PROTO", "RESULT", "DETAIL")]
    for c in result.checks:
        rows.append((c.client, c.kind, c.target, c.via, c.address or "-", c.proto, "ok" if c.ok else "FAIL",
                     c.detail))  # fmt: skip
    lines = _columns(rows)
    if result.gateways:
        grows = [("GATEWAY", "PAIR", "RESULT", f"FLOWS ({result.flows} per pair, traced)")]
        grows += [(g.gateway, g.pair, "ok" if g.ok else "FAIL", g.text()) for g in result.gateways]
        lines += ["", *_columns(grows)]
    if result.failover is not None:
        lines += ["", failover_table(result.failover).rstrip("\n")]
    passed = sum(1 for c in result.checks if c.ok) + sum(1 for g in result.gateways if g.ok)
    total = len(result.checks) + len(result.gateways)
    lines += ["", *(f"FAIL {line}" for line in _failing(result))]
    verdict = "OK" if result.ok else "FAIL"
    lines.append(f"{verdict}: {passed}/{total} checks passed between {', '.join(result.clusters)}")
    return "\n".join(lines) + "\n"


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns; the last one (free text) not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1] for r in rows]
