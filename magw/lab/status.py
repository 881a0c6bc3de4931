"""``magw lab status``: what a lab is made of and whether its processes run, as JSON or text."""

from __future__ import annotations

from typing import Any

from magw.lab import netns, procs
from magw.lab.daemons import agent_status
from magw.lab.healthview import health_doc, health_text
from magw.lab.layout import ClusterLayout, LabLayout, layout
from magw.lab.state import LabState


def _cluster_doc(c: ClusterLayout) -> dict[str, Any]:
    return {
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
            {"name": s.name, "ip": str(s.ip), "port": s.port, "backends": [str(b) for b in s.backends]}
            for s in c.services
        ],
        "gateways": [
            {"name": g.name, "namespace": g.namespace, "private_ip": str(g.node_ip), "public_ip": str(g.public_ip)}
            for g in c.gateways
        ],
    }


def _daemon_doc(st: LabState, lab: LabLayout, rec: procs.ProcRecord) -> dict[str, Any]:
    doc: dict[str, Any] = {"node": rec.owner, "kind": rec.kind, "pid": rec.pid, "alive": procs.alive(rec)}
    if rec.kind == "route-agent":
        agent = agent_status(st, lab.node(rec.owner)) or {}
        doc["converged"] = agent.get("converged") is True
        doc["waiting"] = agent.get("waiting")
    return doc


def status_doc(st: LabState) -> dict[str, Any]:
    """The status document (see docs/lab.md): layout, namespaces present, processes alive."""
    lab = layout(st.name, st.topology)
    present = set(netns.list_namespaces())
    return {
        "name": st.name,
        "phase": st.phase,
        "multi_active": st.topology.multi_active,
        "strategy": st.topology.strategy.value,
        "wan_rate": st.topology.wan_rate,
        "state_dir": str(st.dir),
        "clusters": [_cluster_doc(c) for c in lab.clusters],
        "namespaces": {"expected": len(st.namespaces), "present": sum(1 for ns in st.namespaces if ns in present)},
        "daemons": [_daemon_doc(st, lab, p) for p in st.processes if p.kind != "echo"],
        "servers": [{"pod": p.owner, "pid": p.pid, "alive": procs.alive(p)} for p in st.processes if p.kind == "echo"],
        "health": health_doc(lab, st),
    }


def status_text(doc: dict[str, Any]) -> str:
    """A human-readable summary of ``status_doc``."""
    lines = [
        f"lab {doc['name']}: {doc['phase']}, strategy {doc['strategy']}, "
        f"{'multi-active' if doc['multi_active'] else 'single-gateway'}, "
        f"namespaces {doc['namespaces']['present']}/{doc['namespaces']['expected']}"
    ]
    for c in doc["clusters"]:
        lines.append(f"cluster {c['id']}: pods {c['pod_cidr']}, services {c['service_cidr']}, underlay {c['underlay']}")
        for n in c["nodes"]:
            public = next((g["public_ip"] for g in c["gateways"] if g["name"] == n["name"]), None)
            wan = f"  wan {public}" if public else ""
            lines.append(f"  {n['role']:<7} {n['name']:<14} node {n['node_ip']:<14} cni {n['cni_ip']:<12}{wan}")
        for s in c["services"]:
            lines.append(f"  service {s['name']} {s['ip']}:{s['port']} -> {', '.join(s['backends']) or 'no backends'}")
    alive = sum(1 for s in doc["servers"] if s["alive"])
    lines.append(f"echo servers: {alive}/{len(doc['servers'])} alive")
    for d in doc["daemons"]:
        sync = ""
        if d["kind"] == "route-agent":
            sync = "  converged" if d["converged"] else f"  not converged{': ' + d['waiting'] if d['waiting'] else ''}"
        lines.append(f"  {d['kind']:<11} {d['node']:<14} pid {d['pid']:<8} {'alive' if d['alive'] else 'DEAD'}{sync}")
    if doc["daemons"]:
        lines += health_text(doc["health"])
    return "\n".join(lines)
