"""What a lab cluster's API server holds at ``up --control-plane kube``: the file broker's documents as objects.

Per cluster, in its own emulator (the shapes of deploy/crds and docs/kubernetes.md):

- its Nodes: the InternalIP, the node's pod subnet (``spec.podCIDRs``), the label ``submariner.io/gateway=true``
  on gateways and their public IP in the annotation ``gateway.submariner.io/public-ip``. Not the
  ``submariner.io/cniIfaceIp`` annotation: each route agent finds its node's CNI address and publishes it, as
  on a real cluster;
- its own Cluster CR only: the gateways' broker sync brings the other clusters' (and their Endpoints);
- the Submariner CR (``multiActiveGatewayEnabled``) and the ConfigMap ``magw-config`` (strategy, MTU, cable,
  ``keepClientIP`` when the topology turns it on);
- with Globalnet, what ``magw.lab.planes.globalnet_docs`` writes for the file broker: Namespaces, Pods (Running on
  their lab node, with their IP in the status), Services, ServiceExports, the cluster egress template and the
  topology's GlobalEgressIPs, and an EndpointSlice for each headless Service without a selector;
- in the egress cluster (``egress:``), its EgressConfig and EgressVIPs, and its workloads (without Globalnet too).

EndpointSlices: a real cluster has them for every Service with endpoints. The lab writes them only where the
file broker names the addresses too (a headless Service without a selector): the Kubernetes source turns the
slices of a Service *with* a selector into ``endpoint_addresses``, which the snapshot refuses for such a
Service ("only a headless service without a selector names its addresses"), so the Service would be left out.
"""

from __future__ import annotations

from typing import Any

from magw.lab.build.cloud import cable_port
from magw.lab.planes.egressgw import egressgw_model
from magw.lab.planes.globalnet_docs import CLUSTER_EGRESS_TEMPLATE
from magw.lab.spec.cluster import DEFAULT_NAMESPACE, GlobalEgressSpec
from magw.lab.spec.layout import ClusterLayout, LabLayout, NodeLayout, PodLayout, ServiceLayout
from magw.snapshot.egressgw import config_to_doc, vip_to_doc
from magw.sources.kube import mapping

NAMESPACE = "submariner-operator"
BROKER_NAMESPACE = "submariner-k8s-broker"
Obj = dict[str, Any]


def _obj(kind: str, api_version: str, name: str, namespace: str | None = None, **rest: Any) -> Obj:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **rest}


def node_object(node: NodeLayout) -> Obj:
    # The node's pod subnet as its node IPAM would set it: podCIDR, and podCIDRs whose first entry it is
    spec = {"podCIDR": str(node.pod_subnet), "podCIDRs": [str(node.pod_subnet)]}
    status = {"addresses": [{"type": "InternalIP", "address": str(node.node_ip)}]}
    obj = _obj("Node", "v1", node.name, spec=spec, status=status)
    if node.gateway:
        obj["metadata"]["labels"] = {mapping.GATEWAY_LABEL: "true"}
    if node.public_ip is not None:
        obj["metadata"]["annotations"] = {mapping.PUBLIC_IP_ANNOTATION: f"ipv4:{node.public_ip}"}
    return obj


def cluster_object(c: ClusterLayout) -> Obj:
    spec: dict[str, Any] = {"cluster_id": c.id, "cluster_cidr": [str(c.pod_cidr)]}
    spec["service_cidr"] = [str(c.service_cidr)]
    if c.global_cidr is not None:
        spec["global_cidr"] = [str(c.global_cidr)]
    return _obj("Cluster", "submariner.io/v1", c.id, NAMESPACE, spec=spec)


def config_objects(lab: LabLayout, c: ClusterLayout, cni: str = "generic") -> list[Obj]:
    """The Submariner CR and the ConfigMap ``magw-config``: what the file broker's Config document says. ``cni``
    ``ovn``: the Submariner CR's ``networkPlugin`` is ``OVNKubernetes``, as Submariner's operator sets it."""
    topo = lab.topology
    spec: dict[str, Any] = {"multiActiveGatewayEnabled": topo.multi_active, "clusterID": c.id}
    if cni == "ovn":
        spec["networkPlugin"] = "OVNKubernetes"
    submariner = _obj("Submariner", "submariner.io/v1alpha1", mapping.SUBMARINER, NAMESPACE, spec=spec)
    data = {"strategy": topo.strategy.value, "underlayMTU": str(topo.underlay_mtu), "cable": topo.cable.value}
    # off: no key, as in the file broker's Config; on OVN neither (OVN balances services in its routers)
    if topo.keep_client_ip and cni == "generic":
        data["keepClientIP"] = "true"
    return [submariner, _obj("ConfigMap", "v1", mapping.CONFIG_MAP, NAMESPACE, data=data)]


def _pod(p: PodLayout) -> Obj:
    meta_labels = dict(p.labels)
    obj = _obj(
        "Pod",
        "v1",
        p.short,
        p.kube_namespace,
        spec={"nodeName": p.node, "containers": [{"name": "echo", "image": "magw-lab-echo"}]},
        status={"phase": "Running", "podIP": str(p.ip), "podIPs": [{"ip": str(p.ip)}],
                "conditions": [{"type": "Ready", "status": "True"}]},
    )
    if meta_labels:
        obj["metadata"]["labels"] = meta_labels
    return obj


def _service(s: ServiceLayout) -> list[Obj]:
    ports = [
        {"name": proto.lower(), "port": s.port, "protocol": proto, "targetPort": s.target_port}
        for proto in ("TCP", "UDP")
    ]
    spec: dict[str, Any] = {"clusterIP": "None" if s.cluster_ip is None else str(s.cluster_ip), "ports": ports}
    if s.selector is not None:
        spec["selector"] = dict(s.selector)
    out = [_obj("Service", "v1", s.name, s.namespace, spec=spec)]
    if s.selector is None and s.headless:  # see the module docstring
        out.append(
            _obj(
                "EndpointSlice",
                "discovery.k8s.io/v1",
                f"{s.name}-lab",
                s.namespace,
                addressType="IPv4",
                endpoints=[{"addresses": [str(b)], "conditions": {"ready": True}} for b in s.backends],
                ports=[{"name": p["name"], "port": s.target_port, "protocol": p["protocol"]} for p in ports],
            )
        )
        out[-1]["metadata"]["labels"] = {mapping.SERVICE_NAME_LABEL: s.name}
    if s.export:
        out.append(_obj("ServiceExport", "multicluster.x-k8s.io/v1alpha1", s.name, s.namespace))
    return out


def _global_egress(e: GlobalEgressSpec) -> Obj:
    spec: dict[str, Any] = {"numberOfIPs": e.number_of_ips}
    if e.pod_selector is not None:
        spec["podSelector"] = {"matchLabels": dict(e.pod_selector)}
    return _obj("GlobalEgressIP", "submariner.io/v1", e.name, e.namespace, spec=spec)


def workload_objects(c: ClusterLayout) -> list[Obj]:
    """The cluster's Namespaces, Pods and Services (with their EndpointSlices and ServiceExports)."""
    namespaces = {DEFAULT_NAMESPACE, *(p.kube_namespace for p in c.pods), *(s.namespace for s in c.services)}
    namespaces |= {e.namespace for e in c.global_egress_ips}
    out = [_obj("Namespace", "v1", ns) for ns in sorted(namespaces)]
    out += [_pod(p) for p in c.pods]
    for s in c.services:
        out += _service(s)
    return out


def globalnet_objects(c: ClusterLayout) -> list[Obj]:
    """The workloads and Globalnet objects of a Globalnet cluster (``magw.lab.planes.globalnet_docs`` as objects)."""
    out = workload_objects(c)
    template = {"numberOfIPs": c.cluster_egress_ips}
    out.append(_obj("ClusterGlobalEgressIP", "submariner.io/v1", CLUSTER_EGRESS_TEMPLATE, NAMESPACE, spec=template))
    out += [_global_egress(e) for e in c.global_egress_ips]
    return out


def public_service_name(node: NodeLayout) -> str:
    """The LoadBalancer Service in front of a gateway behind the lab's cloud (its ``--public-service``)."""
    return f"magw-gw-{node.name}"


def load_balancer_services(c: ClusterLayout, cable_port: int) -> list[Obj]:
    """With ``load_balancer``: a ``LoadBalancer`` Service per gateway, as a cloud controller leaves it: one UDP
    port (the gateway's listener on the cloud) and ``status.loadBalancer.ingress`` the cloud's one address, shared
    by every gateway's Service (as MetalLB's ``allow-shared-ip`` or a cloud's port-per-listener does). Its
    clusterIP is a free one of the service range (services + 250 + k); it has no selector (the lab's gateways are
    nodes, not pods)."""
    if c.cloud is None:
        return []
    out = []
    for k, gw in enumerate(c.gateways, start=1):
        ports = [{"name": "cable", "protocol": "UDP", "port": gw.public_port, "targetPort": cable_port}]
        spec = {"type": "LoadBalancer", "clusterIP": str(c.service_cidr.network_address + 250 + k), "ports": ports}
        status = {"loadBalancer": {"ingress": [{"ip": str(c.cloud.public_ip)}]}}
        out.append(_obj("Service", "v1", public_service_name(gw), NAMESPACE, spec=spec, status=status))
    return out


def egress_objects(lab: LabLayout, c: ClusterLayout) -> list[Obj]:
    """With ``egress:`` in cluster ``c``: its EgressConfig ``default`` and its EgressVIPs (deploy/crds), whose specs
    are the file broker's documents (``magw.lab.planes.egressgw``), and the workloads their bindings resolve
    against unless Globalnet writes them already. No status: the controller writes it."""
    spec = lab.topology.egressgw
    if spec is None or spec.cluster != c.id:
        return []
    model = egressgw_model(lab)
    out = [] if lab.topology.globalnet else workload_objects(c)
    config = config_to_doc(model.config)
    out.append(_obj("EgressConfig", "submariner.io/v1alpha1", mapping.EGRESS_CONFIG, NAMESPACE, spec=config))
    for v in model.vips:
        body = vip_to_doc(v)
        name = body.pop("name")
        out.append(_obj("EgressVIP", "submariner.io/v1alpha1", name, NAMESPACE, spec=body))
    return out


def cluster_objects(lab: LabLayout, c: ClusterLayout, cni: str = "generic") -> list[Obj]:
    """Everything ``up`` writes into cluster ``c``'s emulator, in creation order."""
    out = [*config_objects(lab, c, cni), cluster_object(c), *(node_object(n) for n in c.nodes)]
    out += load_balancer_services(c, cable_port(lab))
    if lab.topology.globalnet:
        out += globalnet_objects(c)
    return out + egress_objects(lab, c)
