"""The egress gateway lab (docs/lab.md): the outside network, the VIPs as broker documents, the egress cluster's
workloads.

A topology with an ``egress:`` key (``magw.lab.spec.egressgw``) gets, besides the usual lab:

- an **outside** namespace ``<lab>-outside`` on the egress cluster's underlay bridge, at the underlay's ``.250``
  (``OUTSIDE_HOST``): the world outside the cluster. It runs an echo server (``magw.lab.payload.traffic serve``, name
  ``outside``) that answers with the source address it saw, and the demo's and tests' clients run there too.
  It is outside the cluster's pod and service CIDRs and of every other cluster's, so pod traffic to it is
  egress traffic; being on the nodes' L2, it learns a VIP's holder from keepalived's gratuitous ARPs, as the
  cluster's edge router would.
- the broker documents of the egress cluster's Kubernetes objects that the egress gateway reads (Namespaces,
  Pods, Services), one ``EgressConfig`` (the VIP range: ``magw.lab.spec.egressgw.vip_range``, the
  ``advert_int``, ``conntrack_sync``) and one ``EgressVIP`` per VIP, with full node names.

What the outside must see of each pod (``expected_sources``) and which Services a VIP carries
(``bound_services``) are computed here from the topology's text, for ``lab up``'s readiness wait and the demo.
"""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

from magw.desired.egressgw.bindings import resolve
from magw.lab.planes.globalnet_docs import cluster_documents
from magw.lab.spec import naming
from magw.lab.spec.egressgw import EgressGatewayLabSpec, vip_range
from magw.lab.spec.layout import ClusterLayout, LabLayout, PodLayout, ServiceLayout
from magw.model.egressgw import EgressConfig, EgressGateway, EgressVIP
from magw.model.globalnet import Pod, Service, ServicePort
from magw.snapshot.egressgw import config_to_doc, vip_to_doc

OUTSIDE_HOST = 250
OUTSIDE_PORT = "outside"  # its port on the underlay bridge
OUTSIDE_NAME = "outside"  # the echo server's name in its replies
WORKLOAD_KINDS = ("Namespace", "Pod", "Service")


def spec_of(lab: LabLayout) -> EgressGatewayLabSpec | None:
    return lab.topology.egressgw


def cluster_of(lab: LabLayout) -> ClusterLayout:
    spec = lab.topology.egressgw
    if spec is None:
        raise ValueError(f"lab {lab.name} has no egress gateway")
    return lab.cluster(spec.cluster)


def outside_ns(lab: LabLayout) -> str | None:
    return None if lab.topology.egressgw is None else naming.outside_ns(lab.name)


def outside_ip(lab: LabLayout) -> IPv4Address:
    return cluster_of(lab).underlay.network_address + OUTSIDE_HOST


def egressgw_model(lab: LabLayout) -> EgressGateway:
    """The VIPs as the model has them: candidates with full node names (``east-gw1``)."""
    spec = lab.topology.egressgw
    if spec is None:
        return EgressGateway()
    c = cluster_of(lab)
    vips = [
        EgressVIP(
            name=v.name,
            vip=v.vip,
            vrid=v.vrid,
            candidates=tuple(naming.node_name(c.id, s) for s in v.candidates),
            bindings=v.bindings,
        )
        for v in spec.vips
    ]
    config = EgressConfig(
        vip_ranges=(vip_range(c.index),), advert_int=spec.advert_int, conntrack_sync=spec.conntrack_sync
    )
    return EgressGateway(config=config, vips=vips)


def outside_commands(lab: LabLayout) -> list[str]:
    """``ip -batch`` lines inside the outside namespace: its veth (the peer goes to the underlay namespace)."""
    c = cluster_of(lab)
    mtu = lab.topology.underlay_mtu
    return [
        f"link add {naming.UNDERLAY_IF} mtu {mtu} type veth peer name {OUTSIDE_PORT} mtu {mtu} netns {c.underlay_ns}",
        f"addr add {outside_ip(lab)}/{c.underlay.prefixlen} dev {naming.UNDERLAY_IF}",
        f"link set {naming.UNDERLAY_IF} up",
    ]


def egressgw_documents(lab: LabLayout) -> dict[str, dict[str, Any]]:
    """File name -> broker document: the egress cluster's workloads, its EgressConfig and its EgressVIPs."""
    if lab.topology.egressgw is None:
        return {}
    c = cluster_of(lab)
    docs = {name: d for name, d in cluster_documents(c).items() if d["kind"] in WORKLOAD_KINDS}
    model = egressgw_model(lab)
    docs[f"egress@{c.id}@config.yaml"] = {"kind": "EgressConfig", "cluster": c.id, **config_to_doc(model.config)}
    for v in model.vips:
        docs[f"egress@{c.id}@vip@{v.name}.yaml"] = {"kind": "EgressVIP", "cluster": c.id, **vip_to_doc(v)}
    return docs


def workloads(lab: LabLayout) -> tuple[list[Service], list[Pod]]:
    """The egress cluster's Services (with a selector) and Pods as the binding resolver reads them."""
    c = cluster_of(lab)
    pods = [Pod(namespace=p.kube_namespace, name=p.short, ip=p.ip, labels=p.labels, node=p.node) for p in c.pods]
    services = [
        Service(
            namespace=s.namespace,
            name=s.name,
            cluster_ip=s.cluster_ip,
            selector=s.selector,
            ports=(ServicePort(port=s.port),),
        )
        for s in c.services
        if s.selector is not None
    ]
    return services, pods


def expected_sources(lab: LabLayout) -> dict[str, tuple[PodLayout, str, str]]:
    """Pod name -> (pod, the address the outside must see, why)."""
    c = cluster_of(lab)
    model = egressgw_model(lab)
    services, pods = workloads(lab)
    res = resolve(model, services, pods)
    vip_of = {ip: v for v in model.vips for ip in res.of(v.name).pods}
    out = {}
    for p in c.pods:
        vip = vip_of.get(p.ip)
        node = lab.node(p.node)
        if vip is not None:
            out[p.name] = (p, str(vip.vip), f"bound to VIP {vip.name}")
        else:
            out[p.name] = (p, str(node.node_ip), "unbound: its node (the CNI masquerade)")
    return out


def bound_services(lab: LabLayout) -> list[tuple[str, ServiceLayout, IPv4Address]]:
    """(VIP name, Service, VIP) of every Service that uses a VIP, with backends."""
    model = egressgw_model(lab)
    services, pods = workloads(lab)
    res = resolve(model, services, pods)
    out = []
    for v in model.vips:
        for full in res.of(v.name).services:
            ns, _, name = full.partition("/")
            svc = next(s for s in cluster_of(lab).services if s.namespace == ns and s.name == name)
            if svc.backends:
                out.append((v.name, svc, v.vip))
    return out
