"""``magw lab status``: what a lab is made of and whether its processes run, as JSON or text.

With Globalnet a cluster also shows what its controller allocated (read from the broker, ``globalview``):
pods show their Kubernetes ``namespace`` (and ``netns``, the network namespace), ``labels``; exported
services their ``global_ip``; global egress objects their addresses per gateway; gateways their cluster
egress IPs. Without Globalnet the document is what it always was.

``control_plane`` says what feeds the daemons: ``{"kind": "file", "broker_dir": ...}``, or with
``--control-plane kube`` ``{"kind": "kube", "emulators": [...]}``, one entry per API server emulator (name,
role, pid, alive, socket, kubeconfig, kubectl_kubeconfig and kubectl (``magw lab kubectl``), and the Endpoints
it holds); the emulators are not in ``daemons``.

``cni`` is ``generic`` or ``ovn``; an OVN lab also has ``ovn``: per cluster its NB and SB sockets, its servers'
and syncer's PIDs, and the syncer's last sync (``magw.lab.planes.ovn``); those processes are not in ``daemons``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

from magw.lab.build import builds, netns, procs
from magw.lab.build.state import LabState
from magw.lab.observe import egressgw_status, kube_view
from magw.lab.observe.globalview import ClusterView
from magw.lab.observe.healthview import health_doc, health_text
from magw.lab.planes import kube, ovn_nodes
from magw.lab.planes import ovn as lab_ovn
from magw.lab.planes.daemons import agent_status
from magw.lab.planes.kube_kubectl import kubectl_kubeconfig
from magw.lab.planes.readiness import read_views, views_readable
from magw.lab.spec.layout import ClusterLayout, LabLayout, layout


def _cluster_doc(c: ClusterLayout, view: ClusterView | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": c.id,
        "pod_cidr": str(c.pod_cidr),
        "service_cidr": str(c.service_cidr),
        "underlay": str(c.underlay),
        "nodes": [
            {
                "name": n.name,
                "role": n.role,
                "namespace": n.namespace,
                "node_ip": str(n.node_ip),
                "cni_ip": str(n.cni_ip),
            }
            for n in c.nodes
        ],
        "pods": [{"name": p.name, "namespace": p.namespace, "ip": str(p.ip), "node": p.node} for p in c.pods],
        "services": [
            {"name": s.name, "ip": _opt(s.cluster_ip), "port": s.port, "backends": [str(b) for b in s.backends]}
            for s in c.services
        ],
        "gateways": [
            {"name": g.name, "namespace": g.namespace, "private_ip": str(g.node_ip), "public_ip": str(g.public_ip),
             "public_port": g.public_port}
            for g in c.gateways
        ],
    }  # fmt: skip
    if c.cloud is not None:
        doc["cloud"] = {"namespace": c.cloud.namespace, "public_ip": str(c.cloud.public_ip)}
    if view is not None:
        _add_globalnet(doc, c, view)
    return doc


def _ips(ips: Iterable[IPv4Address]) -> list[str]:
    return [str(ip) for ip in ips]


def _add_globalnet(doc: dict[str, Any], c: ClusterLayout, view: ClusterView) -> None:
    """The Globalnet fields of a cluster's document (docs/lab.md lists them)."""
    doc["global_cidr"] = str(c.global_cidr)
    doc["pods"] = [
        {"name": p.name, "namespace": p.kube_namespace, "netns": p.namespace, "ip": str(p.ip), "node": p.node,
         "labels": dict(p.labels), "global_ip": _opt(view.pod_ip(p.kube_namespace, p.ip))}
        for p in c.pods
    ]  # fmt: skip
    for sdoc, s in zip(doc["services"], c.services, strict=True):
        sdoc.update(namespace=s.namespace, headless=s.headless, export=s.export, ip=_opt(s.cluster_ip))
        if s.export and s.cluster_ip is not None:
            sdoc["global_ip"] = _opt(view.service_ip(s.namespace, s.name))
        elif s.export:
            sdoc["global_ips"] = {str(b): str(g) for b, g in view.backend_ips(s.namespace, s.name).items()}
    for gdoc in doc["gateways"]:
        gdoc["cluster_egress_ips"] = _ips(view.gateway_egress.get(gdoc["name"], ()))
    doc["global_egress_ips"] = []
    for e in c.global_egress_ips:
        owners = view.egress_objects.get((e.namespace, e.name), {})
        doc["global_egress_ips"].append(
            {
                "name": e.name,
                "namespace": e.namespace,
                "number_of_ips": e.number_of_ips,
                "pod_selector": None if e.pod_selector is None else {"matchLabels": dict(e.pod_selector)},
                "addresses": _ips(sorted(ip for ips in owners.values() for ip in ips)),
                "owners": {node: _ips(ips) for node, ips in sorted(owners.items())},
            }
        )


def _opt(ip: IPv4Address | None) -> str | None:
    return None if ip is None else str(ip)


SYNC_STATES = ("converged", "not converged", "no status yet", "stale", "dead")


def agent_sync(*, alive: bool, status: Mapping[str, Any] | None, started_at: float | None) -> str:
    """What a route agent's status file says of it, one of ``SYNC_STATES``: ``dead`` when its process is gone
    (the file is a dead process's last word), ``stale`` when the file was written before this process started
    (``started_at``, seconds since the epoch; its ``updated_at`` missing or older), else what the file says."""
    if not alive:
        return "dead"
    if status is None:
        return "no status yet"
    if started_at is not None:
        try:
            updated = datetime.fromisoformat(str(status.get("updated_at"))).timestamp()
        except ValueError:
            return "stale"
        if updated < started_at:
            return "stale"
    return "converged" if status.get("converged") is True else "not converged"


def _started_at(rec: procs.ProcRecord) -> float | None:
    """When ``rec``'s process started, seconds since the epoch (from its start ticks and the uptime)."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - rec.start_ticks / os.sysconf("SC_CLK_TCK"))


def _agents(st: LabState, lab: LabLayout) -> dict[str, tuple[str, dict[str, Any] | None]]:
    """Node -> (its route agent's ``agent_sync``, its status document when that is current, else None)."""
    out: dict[str, tuple[str, dict[str, Any] | None]] = {}
    for rec in st.processes:
        if rec.kind == "route-agent":
            doc = agent_status(st, lab.node(rec.owner))
            sync = agent_sync(alive=procs.alive(rec), status=doc, started_at=_started_at(rec))
            out[rec.owner] = (sync, current_status(sync, doc))
    return out


def current_status(sync: str, status: dict[str, Any] | None) -> dict[str, Any] | None:
    """``status`` when it is the running process's own (``sync`` from ``agent_sync``), else None: a dead or
    stale file says nothing of now, neither its convergence nor its health probes."""
    return status if sync in ("converged", "not converged") else None


def _daemon_doc(rec: procs.ProcRecord, agents: Mapping[str, tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    doc: dict[str, Any] = {"node": rec.owner, "kind": rec.kind, "pid": rec.pid, "alive": procs.alive(rec),
                           "build": builds.describe(rec.build)}  # fmt: skip
    if rec.kind == "route-agent":
        sync, agent = agents.get(rec.owner, ("no status yet", None))
        doc["sync"] = sync
        doc["converged"] = sync == "converged"
        doc["waiting"] = (agent or {}).get("waiting")
    return doc


def _view(st: LabState, c: ClusterLayout, views: dict[str, ClusterView]) -> ClusterView | None:
    if not st.topology.globalnet:
        return None
    return views.get(c.id) or ClusterView(cluster=c.id)


_NOT_DAEMONS = ("echo", kube.KUBELET, *kube.EMULATOR_KINDS, *lab_ovn.OVN_KINDS, *ovn_nodes.OVS_KINDS)


def status_doc(st: LabState) -> dict[str, Any]:
    """The status document (see docs/lab.md): layout, namespaces present, processes alive."""
    lab = layout(st.name, st.topology)
    views = read_views(lab, st) if st.topology.globalnet and views_readable(st) else {}
    present = set(netns.list_namespaces())
    agents = _agents(st, lab)
    return {
        "name": st.name,
        "phase": st.phase,
        "multi_active": st.topology.multi_active,
        "strategy": st.topology.strategy.value,
        "cable": st.topology.cable.value,
        "wan_rate": st.topology.wan_rate,
        "load_balancer": None if st.topology.load_balancer is None else st.topology.load_balancer.to_doc(),
        "state_dir": str(st.dir),
        "globalnet": st.topology.globalnet,
        "clusters": [_cluster_doc(c, _view(st, c, views)) for c in lab.clusters],
        "namespaces": {"expected": len(st.namespaces), "present": sum(1 for ns in st.namespaces if ns in present)},
        "control_plane": _control_plane_doc(st),
        "cni": st.cni,
        **({"ovn": lab_ovn.status_doc(lab, st)} if st.ovn else {}),
        **({"egress": egressgw_status.status_doc(lab, st)} if st.topology.egressgw is not None else {}),
        "daemons": [_daemon_doc(p, agents) for p in st.processes if p.kind not in _NOT_DAEMONS],
        "servers": [{"pod": p.owner, "pid": p.pid, "alive": procs.alive(p)} for p in st.processes if p.kind == "echo"],
        "health": health_doc(lab, st, {node: doc for node, (_sync, doc) in agents.items()}),
    }


def _control_plane_doc(st: LabState) -> dict[str, Any]:
    if not st.kube:
        return {"kind": "file", "broker_dir": str(st.broker_dir)}
    records = {(r.kind, r.owner): r for r in st.processes}
    emulators = []
    for api in kube.api_servers(st):
        rec = records.get((api.kind, api.name))
        alive = rec is not None and procs.alive(rec)
        emulators.append(
            {
                "name": api.name,
                "role": api.role,
                "pid": rec.pid if rec is not None else None,
                "alive": alive,
                "socket": str(api.socket),
                "kubeconfig": str(api.kubeconfig),
                # kubectl's: 127.0.0.1:6443 inside api.netns (magw.lab.planes.kube_kubectl)
                "kubectl_kubeconfig": str(kubectl_kubeconfig(api.socket)),
                "kubectl": f"magw lab kubectl {api.name} --name {st.name} -- ARGS",
                "endpoints": sorted(kube_view.objects_of(api, "Endpoint")) if alive else [],
            }
        )
    kubelets = [{"cluster": r.owner, "pid": r.pid, "alive": procs.alive(r)} for r in st.processes
                if r.kind == kube.KUBELET]  # fmt: skip
    return {"kind": "kube", "emulators": emulators, "kubelets": kubelets}


def status_text(doc: dict[str, Any]) -> str:
    """A human-readable summary of ``status_doc``."""
    lines = [
        f"lab {doc['name']}: {doc['phase']}, strategy {doc['strategy']}, "
        f"{'multi-active' if doc['multi_active'] else 'single-gateway'}, cable {doc.get('cable', 'vxlan')}, "
        f"namespaces {doc['namespaces']['present']}/{doc['namespaces']['expected']}"
    ]
    for c in doc["clusters"]:
        gcidr = f", global {c['global_cidr']}" if "global_cidr" in c else ""
        cloud = f", behind cloud {c['cloud']['public_ip']}" if "cloud" in c else ""
        lines.append(
            f"cluster {c['id']}: pods {c['pod_cidr']}, services {c['service_cidr']}{gcidr}, underlay {c['underlay']}"
            f"{cloud}"
        )
        for n in c["nodes"]:
            gw = next((g for g in c["gateways"] if g["name"] == n["name"]), None)
            port = f":{gw['public_port']}" if gw is not None and gw.get("public_port") else ""
            wan = f"  {'public' if port else 'wan'} {gw['public_ip']}{port}" if gw is not None else ""
            lines.append(f"  {n['role']:<7} {n['name']:<14} node {n['node_ip']:<14} cni {n['cni_ip']:<12}{wan}")
        for s in c["services"]:
            name = s["name"] if s.get("namespace", "default") == "default" else f"{s['namespace']}/{s['name']}"
            where = f"{s['ip']}:{s['port']}" if s["ip"] is not None else f"headless, port {s['port']}"
            lines.append(f"  service {name} {where} -> {', '.join(s['backends']) or 'no backends'}")
            if "global_ip" in s or "global_ips" in s:
                gips = s.get("global_ip") or ", ".join(f"{g} -> {b}" for b, g in s["global_ips"].items())
                lines.append(f"    exported: global {gips or 'not allocated yet'}")
        lines += _globalnet_text(c)
    lines += _control_plane_text(doc["control_plane"])
    lines += _ovn_text(doc.get("ovn"))
    lines += egressgw_status.status_text(doc.get("egress"))
    alive = sum(1 for s in doc["servers"] if s["alive"])
    lines.append(f"echo servers: {alive}/{len(doc['servers'])} alive")
    for d in doc["daemons"]:
        sync = f"  {_sync_text(d)}" if d["kind"] == "route-agent" else ""
        build = f"  build {d['build']}" if d.get("build") else ""
        lines.append(
            f"  {d['kind']:<11} {d['node']:<14} pid {d['pid']:<8} {'alive' if d['alive'] else 'DEAD'}{sync}{build}"
        )
    if doc["daemons"]:
        lines += health_text(doc["health"])
    return "\n".join(lines)


_SYNC_TEXT = {
    "dead": "no current status (its last one is a dead process's)",
    "stale": "status stale (not written since this process started)",
}


def _sync_text(d: Mapping[str, Any]) -> str:
    sync = str(d.get("sync", "converged" if d.get("converged") else "not converged"))
    if sync == "not converged" and d.get("waiting"):
        return f"not converged: {d['waiting']}"
    return _SYNC_TEXT.get(sync, sync)


def _control_plane_text(cp: dict[str, Any]) -> list[str]:
    if cp["kind"] != "kube":
        return [f"control plane: file broker {cp['broker_dir']}"]
    lines = ["control plane: Kubernetes API server emulators (for tests and the lab, not production)"]
    for e in cp["emulators"]:
        state = "alive" if e["alive"] else "DEAD"
        lines.append(f"  {e['role']:<7} {e['name']:<14} pid {e['pid']!s:<8} {state}  endpoints {len(e['endpoints'])}")
        if "kubectl" in e:
            lines.append(f"          kubectl: {e['kubectl']}  (kubeconfig {e['kubectl_kubeconfig']})")
    return lines


def _ovn_text(ovn: dict[str, Any] | None) -> list[str]:
    if ovn is None:
        return []
    lines = ["cni: ovn (pods on br-int; Open vSwitch and ovn-controller on every node; check: magw lab verify)"]
    for c in ovn["clusters"]:
        dead = [k for k, p in c["processes"].items() if not p["alive"]]
        dead += [f"{k} of {node}" for node, kinds in c["nodes"].items() for k, p in kinds.items() if not p["alive"]]
        last = c["last_sync"] or {}
        sync = "not synced yet" if not last else ("ok" if last.get("ok") else f"FAILED: {last.get('error')}")
        slots = ", ".join(f"{gw} {n}" for gw, n in sorted((last.get("slots") or {}).items()))
        lines.append(f"  {c['cluster']}: nb {c['nb']}  sb {c['sb']}")
        lines.append(f"    processes {'all alive' if not dead else 'DEAD: ' + ', '.join(dead)}; syncer {sync}"
                     f"{'; slots ' + slots if slots else ''}")  # fmt: skip
    return lines


def _globalnet_text(c: dict[str, Any]) -> list[str]:
    lines = [
        f"  egress {g['name']}: {', '.join(g['cluster_egress_ips']) or 'not allocated yet'}"
        for g in c["gateways"]
        if "cluster_egress_ips" in g
    ]
    for e in c.get("global_egress_ips", ()):
        owners = "; ".join(f"{n} {', '.join(ips)}" for n, ips in e["owners"].items()) or "not allocated yet"
        lines.append(f"  GlobalEgressIP {e['namespace']}/{e['name']}: {owners}")
    return lines
