"""``magw lab verify``'s packet checks: real packets across OVN, beside the ``ovn-trace`` proofs.

The OVN lab carries packets (``magw.lab.planes.ovn_nodes``), so every logical path ``magw.lab.verify.ovn`` traces
is also walked by real traffic between pod namespaces. The oracles are the echo servers' replies (which pod
answered and which source address it saw) and the gateways' own device counters, never magw's rows:

- **pods**: from the first pod of every node to the first pod of every other cluster (TCP and UDP): answered, and
  the server saw the client's own address; to the first ClusterIP service of every other cluster (TCP and UDP):
  answered by one of its backends (OVN's load balancer on the serving gateway router picked it);
- **ecmp**: per ordered pair of clusters, ``ECMP_FLOWS`` TCP connections from a pod of the first to a pod of the
  second (TCP: OVN's hash in the userspace datapath ignores UDP ports, ``magw.lab.observe.spread``), every request
  answered; the gateways whose ``vxlan-tunnel`` sent the requests are exactly the ones that should carry traffic
  (``expected_carriers``: every published gateway not marked down with several active gateways, else one), and
  the serving cluster's gateways received them (its ingress, through table 149 and ``ovn-k8s-sub0`` into OVN).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs

from magw.lab.errors import LabError
from magw.lab.observe.spread import SpreadResult, default_pair, run_spread
from magw.lab.spec.layout import ECHO_PORT, ClusterLayout, LabLayout, PodLayout
from magw.lab.verify.check import Check
from magw.lab.verify.connectivity import ConnectivityResult, TrafficTarget, probe_many

ECMP_FLOWS = 32
ECMP_PACKETS = 3
PROBE_TIMEOUT = 3.0  # the userspace datapath's first packet of a flow goes through ovs-vswitchd's upcall

Expected = Callable[[ClusterLayout], set[str]]


def _targets(lab: LabLayout, client: PodLayout) -> list[tuple[str, str, TrafficTarget]]:
    """(kind, label, target) for every other cluster's first pod and first ClusterIP service with backends."""
    out = []
    for r in lab.clusters:
        if r.id == client.cluster:
            continue
        for proto in ("tcp", "udp"):
            if r.pods:
                pod = r.pods[0]
                out.append(("pod", f"{pod.name} {pod.ip}", TrafficTarget(proto=proto, ip=pod.ip, port=ECHO_PORT)))
            svc = next((s for s in r.services if s.cluster_ip is not None and s.backends), None)
            if svc is not None:
                label = f"{r.id}/{svc.name} {svc.ip}:{svc.port}"
                out.append(("service", label, TrafficTarget(proto=proto, ip=svc.ip, port=svc.port)))
    return out


def _pod_line(client: PodLayout, kind: str, label: str, res: ConnectivityResult, backends: set[str]) -> Check:
    what = f"{client.name} -> {label} {res.target.proto}"
    if not res.ok:
        return Check(False, "pods", f"{what}: no answer ({res.error})", how="packet")
    if kind == "pod":
        ok = res.seen_ip == str(client.ip)
        saw = "its own address" if ok else f"{res.seen_ip}, not {client.ip}"
        return Check(ok, "pods", f"{what}: answered by {res.server}, which saw {saw}", how="packet")
    ok = res.server in backends
    return Check(ok, "pods", f"{what}: balanced to {res.server} (saw {res.seen_ip})", how="packet")


def pod_checks(lab: LabLayout) -> Iterator[Check]:
    """The ``pods`` checks (module docstring), all clients at once. A probe that got no answer is sent once more
    (its line says so): on these shared 2-core machines a flow's first packets wait in ovs-vswitchd's upcall
    queue, and a UDP probe's three attempts can all fall in that wait; a broken path fails both times."""
    clients = [pods[0] for c in lab.clusters for n in c.nodes if (pods := c.pods_of(n.name))]
    plan = {p.namespace: _targets(lab, p) for p in clients}
    results = probe_many({ns: [t for *_k, t in items] for ns, items in plan.items()}, timeout=PROBE_TIMEOUT)
    again_plan = {ns: [r.target for r in rs if not r.ok] for ns, rs in results.items()}
    again = probe_many({ns: ts for ns, ts in again_plan.items() if ts}, timeout=PROBE_TIMEOUT)
    retried = {(ns, str(r.target)): r for ns, rs in again.items() for r in rs}
    by_ip = {str(p.ip): p.name for p in lab.pods}
    for client in clients:
        for (kind, label, _t), res in zip(plan[client.namespace], results[client.namespace], strict=True):
            backends: set[str] = set()
            if kind == "service":
                svc = next(s for c in lab.clusters for s in c.services if str(s.ip) == str(res.target.ip))
                backends = {by_ip[str(b)] for b in svc.backends if str(b) in by_ip}
            second = retried.get((client.namespace, str(res.target)))
            check = _pod_line(client, kind, label, second or res, backends)
            yield attrs.evolve(check, text=f"{check.text} (second try)") if second is not None else check


def _shares(res: SpreadResult, cluster: str, column: str) -> dict[str, int]:
    return {g.gateway: getattr(g, column) for g in res.of(cluster)}


def _ecmp_line(lab: LabLayout, res: SpreadResult, expected: set[str], src: ClusterLayout) -> Check:
    sent = _shares(res, res.client.cluster, "tunnel_tx")
    received = _shares(res, res.server.cluster, "tunnel_rx")
    left = {g for g, n in sent.items() if n > 0}
    entered = {g for g, n in received.items() if n > 0}
    answered = res.received == res.sent
    if lab.topology.multi_active:
        carriers_ok = left == expected
        want = f"expected {', '.join(sorted(expected)) or 'none'}"
    else:
        carriers_ok = len(left) == 1 and left <= expected
        want = "expected one active gateway"
    ok = answered and carriers_ok and bool(entered)
    text = (
        f"{src.id} -> {res.server.cluster}: {res.flows} TCP flows {res.client.name} -> {res.server.name}, "
        f"{res.received}/{res.sent} answered; left by "
        + ", ".join(f"{g} {n}" for g, n in sorted(sent.items()))
        + f" ({want}); entered by "
        + ", ".join(f"{g} {n}" for g, n in sorted(received.items()))
    )
    return Check(ok, "ecmp", text, how="packet")


def ecmp_checks(lab: LabLayout, expected: Expected) -> Iterator[Check]:
    """The ``ecmp`` checks (module docstring), one per ordered pair of clusters."""
    for src in lab.clusters:
        for dst in lab.clusters:
            if src.id == dst.id or not src.pods or not dst.pods:
                continue
            # default_pair takes a pod (on a worker if any) of the first two clusters: give it these two.
            client, server = default_pair(attrs.evolve(lab, clusters=(src, dst)))
            try:
                res = run_spread(lab, flows=ECMP_FLOWS, packets=ECMP_PACKETS, pair=(client, server), proto="tcp")
            except (LabError, ValueError) as exc:
                yield Check(False, "ecmp", f"{src.id} -> {dst.id}: {exc}", how="packet")
                continue
            yield _ecmp_line(lab, res, expected(src), src)

