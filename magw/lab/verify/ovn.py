"""``magw lab verify``: the OVN paths of a ``--cni ovn`` lab, proven with ``ovn-trace`` and with real packets.

Each line says which proof it is (``magw.lab.verify.check``). The ``trace`` checks prove what the real northd
compiled from the NB that magw's syncer wrote, packet by packet in the logical pipeline; the ``packet`` checks
(``magw.lab.verify.ovn_packets``) send real traffic along the same paths through every node's Open vSwitch. The
checks read the trace text and the SB (port bindings, chassis), never magw's own rows, and expect what the lab's
layout and broker say (which gateways are up), not what the syncer reports:

- **egress**: from the first pod of every node to a pod and a ClusterIP service of every other cluster, the
  packet crosses exactly one ``submariner_router*``, is routed toward ``169.254.254.10`` (the gateway host's
  ``ovn-k8s-sub0``) and leaves by a ``submariner_gateway*`` localnet port; the l3gateway ports it crossed are
  bound (SB ``Port_Binding`` ``l3gateway-chassis``) to the chassis of one of the cluster's gateways;
- **ecmp**: per remote cluster, ``--select-id`` 1..N (N: the buckets of the reroute policy's ``select()``)
  reach N different gateway routers on N different gateways, which are exactly the gateways that should carry
  traffic: with multi-active gateways every gateway whose Endpoint is published and that the broker's Health
  document does not mark down; else one;
- **ingress**: from every ``submariner_gateway*`` switch's localnet port (a packet from a remote pod, addressed
  to the router port's MAC) to the first pod of every node: it reaches that pod's port;
- **node** (``state``): the kernel and Open vSwitch side that the route agents in OVN mode programmed (tables
  150 and 149, ``br-submariner``), asked of the kernel and ``ovs-vsctl`` (``magw.lab.verify.ovn_node``);
- **pods** and **ecmp** (``packet``): see ``magw.lab.verify.ovn_packets``.
"""

from __future__ import annotations

import csv
import io
import subprocess
from collections.abc import Iterator

import attrs
import yaml

from magw.lab.build.state import LabState
from magw.lab.observe import kube_view
from magw.lab.planes import kube
from magw.lab.planes.ovn import ovn_dir
from magw.lab.planes.ovn_nodes import pod_port
from magw.lab.planes.ovn_servers import OvnDir
from magw.lab.planes.ovn_topology import nbctl, sbctl, wait_sb
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout, PodLayout
from magw.lab.verify import ovn_packets
from magw.lab.verify.check import Check
from magw.lab.verify.ovn_node import node_checks
from magw.lab.verify.ovn_trace import Trace, l3gateway_chassis, microflow, ovn_trace
from magw.sources.file.endpoint_files import endpoint_path
from magw.sources.kube.mapping import endpoint_object_name

HOST_IP = "169.254.254.10"  # ovn-k8s-sub0 on every gateway host
GATEWAY_ROUTER = "submariner_router"  # and submariner_router_<k>
UPLINK_SWITCH = "submariner_gateway"  # and submariner_gateway_<k>
REMOTE_MAC = "02:00:a9:fe:fe:0a"  # any host-side MAC: the uplink switch has no port security


@attrs.frozen
class Verification:
    checks: tuple[Check, ...]
    carriers: dict[tuple[str, str], tuple[str, ...]]  # (cluster, remote cluster) -> gateways the ECMP buckets reach

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def expected_carriers(lab: LabLayout, st: LabState, c: ClusterLayout) -> set[str]:
    """The gateways of ``c`` that should carry traffic: published (their Endpoint file) and not marked down by
    a Health document of the broker; with the kube control plane (no Health documents there), those whose
    Endpoint object is in ``c``'s own API server, where each gateway writes its own."""
    if st.kube:
        held = kube_view.objects_of(kube.cluster_api(st, c.id), "Endpoint")
        return {g.name for g in c.gateways if endpoint_object_name(c.id, g.name) in held}
    down: set[str] = set()
    for path in sorted(st.broker_dir.glob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(doc, dict) and doc.get("kind") == "Health":
            down.update(str(h) for h in doc.get("down") or ())
    return {g.name for g in c.gateways if endpoint_path(st.broker_dir, c.id, g.name).exists() and g.name not in down}


class _Cluster:
    """One cluster's SB and NB, read through ovn-sbctl/ovn-nbctl, with the lookups the checks need."""

    def __init__(self, d: OvnDir, c: ClusterLayout) -> None:
        self.d = d
        self.c = c
        rows = csv.reader(io.StringIO(sbctl(d, "--format=csv", "--no-headings", "--columns=name,hostname", "list",
                                            "Chassis")))  # fmt: skip
        self.hostname = {name: host for name, host in rows}
        self.gateways = {g.name for g in c.gateways}

    def host_of(self, port: str) -> str | None:
        chassis = l3gateway_chassis(self.d, port)
        return None if chassis is None else self.hostname.get(chassis, f"chassis {chassis}")

    def lsp_mac(self, port: str) -> str:
        return nbctl(self.d, "lsp-get-addresses", port).split()[0]

    def lrp_mac(self, port: str) -> str:
        return nbctl(self.d, "get", "Logical_Router_Port", port, "mac").strip().strip('"')

    def uplinks(self) -> Iterator[tuple[str, str, str]]:
        """(switch, its localnet port, the MAC of the router port behind it) for every uplink switch."""
        names = nbctl(self.d, "--bare", "--columns=name", "list", "Logical_Switch").split()
        for sw in sorted(n for n in names if n.startswith(UPLINK_SWITCH)):
            localnet, router_port = None, None
            for line in nbctl(self.d, "lsp-list", sw).splitlines():
                lsp = line.split("(")[-1].rstrip(")")
                kind = nbctl(self.d, "lsp-get-type", lsp).strip()
                if kind == "localnet":
                    localnet = lsp
                elif kind == "router":
                    opts = nbctl(self.d, "lsp-get-options", lsp).split()
                    router_port = next((o.split("=", 1)[1] for o in opts if o.startswith("router-port=")), None)
            if localnet is not None and router_port is not None:
                yield sw, localnet, self.lrp_mac(router_port)


def _routers(t: Trace) -> list[str]:
    return [d for d in t.datapaths if d.startswith(GATEWAY_ROUTER)]


def _egress(cl: _Cluster, t: Trace) -> tuple[bool, str, set[str]]:
    """(ok, why, the gateways whose chassis the crossed l3gateway ports are bound to)."""
    routers = _routers(t)
    hosts = {cl.host_of(p) or f"{p} unbound" for p, kind in t.outputs if kind == "l3gateway"}
    last = t.last_output
    if len(routers) != 1:
        return False, f"crossed {len(routers)} gateway routers ({', '.join(routers) or 'none'})", hosts
    if not t.next_hops or t.next_hops[-1] != HOST_IP:
        return False, f"{routers[0]}: next hop {t.next_hops[-1:] or 'none'}, not {HOST_IP}", hosts
    if last is None or last[1] != "localnet" or not last[0].startswith(UPLINK_SWITCH):
        return False, f"{routers[0]}: left by {last}, not a {UPLINK_SWITCH} localnet port", hosts
    if not hosts or not hosts <= cl.gateways:
        return False, f"{routers[0]}: bound to {', '.join(sorted(hosts)) or 'no chassis'}, not a gateway", hosts
    return True, f"{routers[0]} on {', '.join(sorted(hosts))} -> {HOST_IP} out {last[0]}", hosts


def _from_pod(cl: _Cluster, node: NodeLayout, pod: PodLayout, dst: str, dport: int, select_id: int | None) -> Trace:
    port = pod_port(pod)
    rtos = cl.lrp_mac(f"rtos-{node.name}")
    flow = microflow(port, cl.lsp_mac(port), rtos, str(pod.ip), dst, dport=dport)
    return ovn_trace(cl.d, node.name, flow, select_id=select_id)


def _remote_targets(r: ClusterLayout) -> list[tuple[str, str, int]]:
    out = [(f"{r.id} pod {r.pods[0].ip}", str(r.pods[0].ip), 8080)] if r.pods else []
    svc = next((s for s in r.services if s.cluster_ip is not None and s.backends), None)
    if svc is not None:
        out.append((f"{r.id} service {svc.name} {svc.ip}:{svc.port}", str(svc.ip), svc.port))
    return out


def _failed(what: str, exc: subprocess.CalledProcessError) -> Check:
    return Check(False, what, f"{exc.cmd[0]} failed: {(exc.stderr or '').strip()[:200]}")


def _egress_checks(cl: _Cluster, lab: LabLayout) -> Iterator[Check]:
    c = cl.c
    for node in c.nodes:
        pods = c.pods_of(node.name)
        if not pods:
            continue
        for r in lab.clusters:
            if r.id == c.id:
                continue
            for label, dst, dport in _remote_targets(r):
                what = f"{c.id}: {pods[0].name} -> {label}"
                try:
                    ok, why, _hosts = _egress(cl, _from_pod(cl, node, pods[0], dst, dport, None))
                except subprocess.CalledProcessError as exc:
                    yield _failed("egress", exc)
                    continue
                yield Check(ok, "egress", f"{what}: {why}")


def _ecmp_checks(
    cl: _Cluster, lab: LabLayout, expected: set[str], carriers: dict[tuple[str, str], tuple[str, ...]]
) -> Iterator[Check]:
    c = cl.c
    node = next((n for n in c.nodes if c.pods_of(n.name)), None)
    if node is None:
        return
    pod = c.pods_of(node.name)[0]
    for r in lab.clusters:
        if r.id == c.id or not r.pods:
            continue
        dst = str(r.pods[0].ip)
        try:
            buckets = _from_pod(cl, node, pod, dst, 8080, None).buckets
            reached = []
            for bucket in range(1, buckets + 1):
                reached.append((bucket, *_egress(cl, _from_pod(cl, node, pod, dst, 8080, bucket))))
        except subprocess.CalledProcessError as exc:
            yield _failed("ecmp", exc)
            continue
        hosts = [h for _b, _ok, _why, bound in reached for h in sorted(bound)]
        carriers[(c.id, r.id)] = tuple(sorted(set(hosts)))
        text = "; ".join(f"bucket {b}: {why}" for b, _ok, why, _hs in reached)
        distinct = len(set(hosts)) == len(hosts) == buckets
        if lab.topology.multi_active:
            ok = all(ok for _b, ok, _w, _h in reached) and distinct and set(hosts) == expected
            want = f"expected {', '.join(sorted(expected)) or 'none'}"
        else:
            ok = all(ok for _b, ok, _w, _h in reached) and buckets == 1 and set(hosts) <= expected
            want = "expected one active gateway"
        yield Check(ok, "ecmp", f"{c.id} -> {r.id}: {buckets} bucket(s) reach {', '.join(hosts)} ({want}); {text}")


def _ingress_checks(cl: _Cluster, lab: LabLayout) -> Iterator[Check]:
    c = cl.c
    remote = next((r.pods[0] for r in lab.clusters if r.id != c.id and r.pods), None)
    src = str(remote.ip) if remote is not None else "192.0.2.1"
    for sw, localnet, mac in cl.uplinks():
        for node in c.nodes:
            pods = c.pods_of(node.name)
            if not pods:
                continue
            flow = microflow(localnet, REMOTE_MAC, mac, src, str(pods[0].ip), sport=33000, dport=8080)
            what = f"{c.id}: {localnet} -> {pods[0].name} {pods[0].ip}"
            try:
                t = ovn_trace(cl.d, sw, flow)
            except subprocess.CalledProcessError as exc:
                yield _failed("ingress", exc)
                continue
            routers = _routers(t)
            ok = len(routers) == 1 and t.last_output == (pod_port(pods[0]), "")
            yield Check(ok, "ingress", f"{what}: through {', '.join(routers) or 'no gateway router'}, "
                                       f"out {t.last_output[0] if t.last_output else 'nowhere'}")  # fmt: skip


def verify(lab: LabLayout, st: LabState, *, packets: bool = True) -> Verification:
    """Every check of every cluster (see the module docstring); a failing tool is a failed check, not a crash.
    ``packets=False``: the trace and state checks only."""
    checks: list[Check] = []
    carriers: dict[tuple[str, str], tuple[str, ...]] = {}
    for c in lab.clusters:
        d = ovn_dir(st, c.id)
        try:
            wait_sb(d)  # northd has compiled the syncer's last transaction
            cl = _Cluster(d, c)
        except subprocess.CalledProcessError as exc:
            checks.append(_failed("setup", exc))
            continue
        checks += _egress_checks(cl, lab)
        checks += _ecmp_checks(cl, lab, expected_carriers(lab, st, c), carriers)
        checks += _ingress_checks(cl, lab)
        checks += node_checks(lab, st, c)
    if packets:
        checks += ovn_packets.pod_checks(lab)
        checks += ovn_packets.ecmp_checks(lab, lambda c: expected_carriers(lab, st, c))
    return Verification(checks=tuple(checks), carriers=carriers)
