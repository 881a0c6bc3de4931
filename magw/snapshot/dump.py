"""The Globalnet objects and statuses back to YAML values (the inverse of ``magw.snapshot.globalnet``). Pure.

``status_to_doc`` and ``object_to_doc`` give the bodies of the file broker's documents (which add ``kind`` and
``cluster``); ``globalnet_to_doc`` the snapshot's ``globalnet:`` section.
"""

from __future__ import annotations

from typing import Any

from magw.model.globalnet import (
    GLOBAL_INGRESS_IP,
    ClusterGlobalEgressIP,
    GlobalEgressIP,
    GlobalIngressIP,
    GlobalIPStatus,
    Globalnet,
    Namespace,
    ObjectRef,
    Pod,
    Service,
    ServiceExport,
    ServicePort,
)
from magw.snapshot.globalnet import MODEL_FIELD, SECTION_KEYS


def _ref_doc(ref: ObjectRef) -> dict[str, str]:
    doc = {"kind": ref.kind, "name": ref.name}
    if ref.namespace:
        doc["namespace"] = ref.namespace
    return doc


def status_to_doc(ref: ObjectRef, st: GlobalIPStatus) -> dict[str, Any]:
    """A GlobalnetStatus body (the broker document adds ``kind`` and ``cluster``)."""
    doc: dict[str, Any] = {"object": _ref_doc(ref)}
    if ref.kind == GLOBAL_INGRESS_IP:  # one address: the CRD's ``allocatedIP``
        doc["allocatedIP"] = str(st.allocated_ips[0]) if st.allocated_ips else ""
    else:
        doc["allocatedIPs"] = [str(a) for a in st.allocated_ips]
    if st.gateways:
        doc["gateways"] = [
            {
                "node": g.node,
                "allocatedIPs": [str(a) for a in g.ips],
                **({"goneSince": g.gone_since} if g.gone_since else {}),
            }
            for g in st.gateways
        ]
    if st.pod_selector is not None:
        doc["podSelector"] = st.pod_selector.to_dict()
    doc["conditions"] = [
        {
            "type": c.type,
            "status": c.status.value,
            "reason": c.reason,
            "message": c.message,
            "lastTransitionTime": c.time,
        }
        for c in st.conditions
    ]
    return doc


def object_to_doc(obj: Any) -> dict[str, Any]:
    """The item (or document body) of any Globalnet model object."""
    if isinstance(obj, Namespace):
        return {"name": obj.name, **({"labels": dict(obj.labels)} if obj.labels else {})}
    if isinstance(obj, Pod):
        doc: dict[str, Any] = {"namespace": obj.namespace, "name": obj.name}
        if obj.ip is not None:
            doc["ip"] = str(obj.ip)
        if obj.labels:
            doc["labels"] = dict(obj.labels)
        if obj.node:
            doc["node"] = obj.node
        doc["phase"] = obj.phase.value
        if obj.host_network:
            doc["host_network"] = True
        return doc
    if isinstance(obj, Service):
        doc = {
            "namespace": obj.namespace,
            "name": obj.name,
            "cluster_ip": str(obj.cluster_ip) if obj.cluster_ip else "None",
        }
        if obj.selector is not None:
            doc["selector"] = dict(obj.selector)
        if obj.ports:
            doc["ports"] = [_port_doc(p) for p in obj.ports]
        if obj.endpoint_addresses:
            doc["endpoint_addresses"] = [str(a) for a in obj.endpoint_addresses]
        if obj.publish_not_ready:
            doc["publish_not_ready"] = True
        return doc
    if isinstance(obj, ServiceExport):
        return {"namespace": obj.namespace, "name": obj.name}
    if isinstance(obj, ClusterGlobalEgressIP):
        return {"name": obj.name, "numberOfIPs": obj.number_of_ips}
    if isinstance(obj, GlobalEgressIP):
        doc = {"namespace": obj.namespace, "name": obj.name, "numberOfIPs": obj.number_of_ips}
        if obj.pod_selector is not None:
            doc["podSelector"] = obj.pod_selector.to_dict()
        return doc
    if isinstance(obj, GlobalIngressIP):
        doc = {
            "namespace": obj.namespace,
            "name": obj.name,
            "target": obj.target.value,
            "serviceName": obj.service_name,
            "targetRef": _ref_doc(obj.target_ref),
        }
        if obj.target_ip is not None:
            doc["targetIP"] = str(obj.target_ip)
        return doc
    raise TypeError(f"not a Globalnet object: {type(obj).__name__}")


def _port_doc(port: ServicePort) -> dict[str, Any]:
    doc: dict[str, Any] = {"port": port.port, "protocol": port.protocol}
    if port.name:
        doc["name"] = port.name
    if port.target_port is not None:
        doc["target_port"] = port.target_port
    return doc


def globalnet_to_doc(gn: Globalnet) -> dict[str, Any]:
    """The ``globalnet:`` section; ``parse_globalnet(globalnet_to_doc(g)) == g`` for objects that parsed."""
    doc: dict[str, Any] = {}
    for key in SECTION_KEYS:
        items: Any = getattr(gn, MODEL_FIELD[key])
        if not items:
            continue
        if key == "statuses":
            doc[key] = [status_to_doc(ref, st) for ref, st in items]
        else:
            doc[key] = [object_to_doc(o) for o in items]
    return doc
