"""``magw lab demo --globalnet``: three clusters with identical CIDRs, and which source IP each server saw, and why.

Every pod of every cluster (and each cluster's first worker as host network) opens a TCP connection to every
global IP another cluster exports (its ClusterIP services and headless pods). The matrix prints, per probe,
the server that answered, the source address it saw, and what that address is in the client's cluster,
looked up in the controller's statuses: a gateway's cluster egress IP, a GlobalEgressIP's address on a
gateway, or the pod's own GlobalIngressIP. A probe passes when it was answered and the address is the one
precedence expects for the client (docs/globalnet.md): the object ``magw.ipam.precedence`` picks for the pod,
or a cluster egress IP. Behind an exported ClusterIP service the server sees instead the address of the
server cluster's gateway that took the connection in (its ``cni0`` address): kube-proxy's DNAT state lives on
that gateway, so the replies must come back to it (docs/globalnet.md, "How replies find their gateway"). On an
OVN lab (``--cni ovn``) the service is balanced by the gateway router of the gateway that took the connection
in: with several active gateways the router SNATs it to its join address (docs/ovn.md, "Services"), with one
the backend sees the client's global source like a pod target (docs/ovn-globalnet.md).
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv4Address

import attrs

from magw.desired.ovn.topology import Slot
from magw.ipam.precedence import Level, resolve_egress
from magw.lab.build import lifecycle as build
from magw.lab.build.state import LabState
from magw.lab.observe import kube_view
from magw.lab.observe.globalview import ingress_addresses
from magw.lab.planes.ovn import syncer_status
from magw.lab.scenarios.demo import finish
from magw.lab.spec.layout import ECHO_PORT, LabLayout, layout
from magw.lab.spec.topology import Topology, parse_topology
from magw.lab.verify.connectivity import TrafficTarget, probe_many
from magw.model.globalnet import Globalnet, ObjectRef, TargetType
from magw.sources.file.broker import FileBroker

Output = Callable[[str], None]
HOST = "(host network)"

_SAME = {"pod_cidr": "10.0.0.0/16", "service_cidr": "100.0.0.0/16", "workers": 1, "pods_per_node": 1}
_ECHO = {"name": "echo", "selector": {"app": "echo"}, "export": True}
_DIRECT = {"name": "direct", "selector": {"app": "echo"}, "headless": True, "export": True}
# The demo's clusterset; examples/lab-globalnet.yaml is the same topology as a file (a test keeps them equal).
DEMO = {
    "globalnet": True,
    "clusters": [
        {
            "id": "east", **_SAME, "gateways": 3, "cluster_egress_ips": 2,
            "pods": [
                {"name": "db-0", "namespace": "shop", "node": "w1", "labels": {"role": "db"}},
                {"name": "web-0", "namespace": "shop", "node": "gw1", "labels": {"app": "web"}},
                {"name": "batch-1", "namespace": "shop", "node": "w1"},
            ],
            "services": [
                _ECHO,
                {"name": "web", "namespace": "shop", "selector": {"app": "web"}, "headless": True, "export": True},
            ],
            "global_egress_ips": [
                {"name": "db", "namespace": "shop", "number_of_ips": 1,
                 "pod_selector": {"matchLabels": {"role": "db"}}},
                {"name": "all", "namespace": "shop", "number_of_ips": 2},
            ],
        },
        {"id": "west", **_SAME, "gateways": 2, "cluster_egress_ips": 2, "services": [_ECHO, _DIRECT]},
        {"id": "north", **_SAME, "gateways": 2, "cluster_egress_ips": 2, "services": [_ECHO, _DIRECT]},
    ],
}  # fmt: skip


def demo_topology() -> Topology:
    return parse_topology(DEMO, source="<globalnet demo topology>")


@attrs.frozen(kw_only=True)
class Client:
    cluster: str
    name: str  # the Kubernetes pod name, or HOST
    netns: str
    expected: ObjectRef | None  # None: a cluster egress IP


@attrs.frozen(kw_only=True)
class Row:
    client: Client
    target: str  # "west default/svc-echo 242.2.0.3"
    ok: bool
    server: str | None
    seen: str | None
    why: str
    passed: bool


def globalnets(lab: LabLayout, st: LabState) -> dict[str, Globalnet]:
    """Cluster id -> its Globalnet objects and statuses, read from the broker (or emulators) once per cluster."""
    if st.kube:
        return kube_view.globalnets(lab, st)
    out = {}
    for cluster in lab.clusters:
        broker = FileBroker(st.broker_dir, local_cluster=cluster.id)
        broker.scan()
        out[cluster.id] = broker.snapshot.globalnet if broker.snapshot is not None else Globalnet()
    return out


def owners(gn: Globalnet) -> dict[str, tuple[ObjectRef, str]]:
    """address -> (the object holding it, the gateway whose block it is in, or "" for one-to-one)."""
    out: dict[str, tuple[ObjectRef, str]] = {}
    for ref, status in gn.statuses:
        for block in status.gateways:
            out.update({str(ip): (ref, block.node) for ip in block.ips})
        if not status.gateways:
            out.update({str(ip): (ref, "") for ip in status.allocated_ips})
    return out


def _why(owner: tuple[ObjectRef, str] | None) -> str:
    if owner is None:
        return "not a global IP of the client's cluster"
    ref, gateway = owner
    where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
    return f"{ref.kind} {where}" + (f" (via {gateway})" if gateway else "")


def clients(lab: LabLayout, gns: dict[str, Globalnet]) -> list[Client]:
    out = []
    for cluster in lab.clusters:
        gn = gns[cluster.id]
        precedence = {(e.pod.namespace, e.pod.name): e for e in resolve_egress(gn, gn.ingress_ips).egress}
        for pod in cluster.pods:
            entry = precedence.get((pod.kube_namespace, pod.short))
            expected = entry.source if entry is not None and entry.level is not Level.CLUSTER else None
            out.append(Client(cluster=cluster.id, name=pod.short, netns=pod.namespace, expected=expected))
        workers = [n for n in cluster.nodes if not n.gateway] or list(cluster.nodes)
        out.append(Client(cluster=cluster.id, name=HOST, netns=workers[0].namespace, expected=None))
    return out


def targets(gns: dict[str, Globalnet]) -> dict[str, list[tuple[str, IPv4Address]]]:
    """cluster -> [(label, global IP)] of every exported ClusterIP service and headless pod."""
    return {
        cid: [
            (f"{i.namespace}/{i.name}", i.global_ip)
            for i in ingress_addresses(gn)
            if i.target is not TargetType.HEADLESS_SERVICE_ENDPOINTS
        ]
        for cid, gn in gns.items()
    }


def service_sources(lab: LabLayout, st: LabState, cluster: str) -> dict[str, str] | None:
    """The address a backend of cluster ``cluster``'s exported ClusterIP service sees -> why (the gateway that
    took the connection in); None when it sees the client's own global source (``keep_client_ip``, or an OVN
    lab with one active gateway: its router does not SNAT)."""
    gateways = lab.cluster(cluster).gateways
    if not st.ovn:
        if lab.topology.keep_client_ip:
            return None
        return {str(g.cni_ip): f"ingress gateway {g.name} (return SNAT)" for g in gateways}
    if not lab.topology.multi_active:
        return None
    slots = ((syncer_status(st, cluster) or {}).get("last_sync") or {}).get("slots") or {}
    return {Slot(int(n)).join_ip: f"gateway router of {gw} (load-balancer SNAT)" for gw, n in slots.items()}


def run_globalnet_matrix(lab: LabLayout, st: LabState) -> list[Row]:
    gns = globalnets(lab, st)
    all_clients = clients(lab, gns)
    wanted = targets(gns)
    plan: dict[str, list[TrafficTarget]] = {}
    labels: dict[str, list[str]] = {}
    for c in all_clients:
        for cid, items in wanted.items():
            if cid == c.cluster:
                continue
            for label, ip in items:
                plan.setdefault(c.netns, []).append(TrafficTarget(proto="tcp", ip=ip, port=ECHO_PORT))
                labels.setdefault(c.netns, []).append(f"{cid} {label} {ip}")
    results = probe_many(plan, timeout=2.0)
    own = {cid: owners(gn) for cid, gn in gns.items()}
    behind = {cid: service_sources(lab, st, cid) for cid in gns}
    rows = []
    for c in all_clients:
        for label, r in zip(labels.get(c.netns, []), results.get(c.netns, []), strict=True):
            ingress = behind[label.split(" ", 1)[0]]
            if "/svc-" in label and ingress is not None:  # an exported ClusterIP service: the ingress gateway's
                found = ingress.get(r.seen_ip or "")
                right, why = found is not None, found or "not an ingress gateway"
            else:
                owner = own[c.cluster].get(r.seen_ip or "")
                if c.expected is not None:
                    right = owner is not None and owner[0] == c.expected
                else:
                    right = owner is not None and owner[0].kind == "ClusterGlobalEgressIP"
                why = _why(owner)
                if "/svc-" in label:
                    why = f"client's own IP: {why}"
            rows.append(
                Row(client=c, target=label, ok=r.ok, server=r.server, seen=r.seen_ip, why=why, passed=r.ok and right)
            )
    return rows


def matrix_text(rows: list[Row]) -> str:
    head = ("client", "target (global IP)", "server", "source seen", "why", "")
    lines = [head]
    for r in rows:
        client = f"{r.client.cluster} {r.client.name}"
        lines.append((client, r.target, r.server or "-", r.seen or "-", r.why if r.ok else "no answer",
                      "ok" if r.passed else "FAIL"))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def run_globalnet_demo(
    topology: Topology,
    *,
    name: str,
    keep: bool,
    out: Output,
    wait_timeout: float = 90.0,
    control_plane: str = "file",
    cni: str = "generic",
) -> int:
    """0 when every probe passed, 1 otherwise. The lab is removed unless ``keep``. ``cni="ovn"``: on OVN-Kubernetes'
    datapath (docs/ovn-globalnet.md)."""
    lab = layout(name, topology)
    fed = ", daemons fed by Kubernetes API server emulators" if control_plane == "kube" else ""
    fed += ", pods on OVN" if cni == "ovn" else ""
    out(f"== bringing up Globalnet lab {name} ({len(lab.clusters)} clusters sharing their pod and service CIDRs{fed})")
    st = build.up(
        topology,
        name=name,
        daemons=True,
        wait_timeout=wait_timeout,
        progress=out,
        control_plane=control_plane,
        cni=cni,
    )
    try:
        out("\n== which source IP each server saw, and why (TCP to every exported global IP of the other clusters)")
        rows = run_globalnet_matrix(lab, st)
        out(matrix_text(rows))
        ok = all(r.passed for r in rows)
        out(f"\n== result: {'all OK' if ok else 'FAILURES in the matrix'} ({sum(r.passed for r in rows)}/{len(rows)})")
        return 0 if ok else 1
    finally:
        finish(name, keep=keep, out=out)
