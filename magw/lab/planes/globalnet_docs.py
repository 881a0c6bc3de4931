"""The Kubernetes side of a Globalnet lab, as file broker documents (docs/filebroker.md, docs/globalnet.md).

What a real cluster's API would hold and the ``magw-globalnet`` controller reads: per cluster, every
Kubernetes namespace its pods and services use, every pod (Running, on its lab node), every service (a
ClusterIP one with its ClusterIP, or headless), a ServiceExport per exported service, the cluster egress
template ``cluster-egress.submariner.io`` and the topology's GlobalEgressIPs. The shapes are exactly those
``magw.snapshot.globalnet`` parses. The controller's own files (statuses, GlobalIngressIPs, per-gateway
ClusterGlobalEgressIPs) never collide with these: every name here starts with ``k8s@``.
"""

from __future__ import annotations

from typing import Any

from magw.lab.spec.cluster import DEFAULT_NAMESPACE, GlobalEgressSpec
from magw.lab.spec.layout import ClusterLayout, LabLayout, ServiceLayout

# The template the controller copies into one ClusterGlobalEgressIP per gateway (docs/globalnet.md).
CLUSTER_EGRESS_TEMPLATE = "cluster-egress.submariner.io"


def _file(cluster: str, kind: str, name: str, namespace: str = "") -> str:
    """``k8s@<cluster>@<kind>@<namespace or _>@<name>.yaml``: '@' is in no id or name, so names never clash."""
    return f"k8s@{cluster}@{kind}@{namespace or '_'}@{name}.yaml"


def cluster_documents(c: ClusterLayout) -> dict[str, dict[str, Any]]:
    """File name -> document: every Kubernetes object of cluster ``c`` that the Globalnet controller reads."""
    docs: dict[str, dict[str, Any]] = {}

    def put(kind: str, name: str, namespace: str = "", **fields: Any) -> None:
        ns = {"namespace": namespace} if namespace else {}
        docs[_file(c.id, kind, name, namespace)] = {"kind": kind, "cluster": c.id, **ns, "name": name, **fields}

    namespaces = {DEFAULT_NAMESPACE, *(p.kube_namespace for p in c.pods), *(s.namespace for s in c.services)}
    namespaces |= {e.namespace for e in c.global_egress_ips}
    for ns in sorted(namespaces):
        put("Namespace", ns)
    for p in c.pods:
        put("Pod", p.short, p.kube_namespace, ip=str(p.ip), labels=dict(p.labels), node=p.node, phase="Running")
    for s in c.services:
        put("Service", s.name, s.namespace, **_service_fields(s))
        if s.export:
            put("ServiceExport", s.name, s.namespace)
    put("ClusterGlobalEgressIP", CLUSTER_EGRESS_TEMPLATE, numberOfIPs=c.cluster_egress_ips)
    for e in c.global_egress_ips:
        put("GlobalEgressIP", e.name, e.namespace, **_egress_fields(e))
    return docs


def _service_fields(s: ServiceLayout) -> dict[str, Any]:
    """ClusterIP or headless; two ports (TCP and UDP, as the echo servers answer both) to the echo port."""
    ports = [
        {"name": proto.lower(), "port": s.port, "protocol": proto, "target_port": s.target_port}
        for proto in ("TCP", "UDP")
    ]
    cluster_ip = s.cluster_ip
    fields: dict[str, Any] = {"cluster_ip": None if cluster_ip is None else str(cluster_ip)}
    if s.selector is not None:
        fields["selector"] = dict(s.selector)
    elif s.headless:  # a headless service without a selector names its endpoints itself
        fields["endpoint_addresses"] = [str(b) for b in s.backends]
    fields["ports"] = ports
    return fields


def _egress_fields(e: GlobalEgressSpec) -> dict[str, Any]:
    fields: dict[str, Any] = {"numberOfIPs": e.number_of_ips}
    if e.pod_selector is not None:
        fields["podSelector"] = {"matchLabels": dict(e.pod_selector)}
    return fields


def globalnet_documents(lab: LabLayout) -> dict[str, dict[str, Any]]:
    """Every cluster's documents; empty for a lab without Globalnet."""
    if not lab.topology.globalnet:
        return {}
    docs: dict[str, dict[str, Any]] = {}
    for c in lab.clusters:
        docs.update(cluster_documents(c))
    return docs
