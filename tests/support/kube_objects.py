"""Kubernetes objects of the example clusterset (examples/broker), for tests against the emulator."""

from __future__ import annotations

from typing import Any

from magw.sources.kube import mapping

NS = "submariner-operator"


def node(name: str, ip: str, cni: str | None, *, gateway: bool = False, public: str | None = None) -> dict[str, Any]:
    annotations = {}
    if cni:
        annotations[mapping.CNI_IP_ANNOTATION] = cni
    if public:
        annotations[mapping.PUBLIC_IP_ANNOTATION] = f"ipv4:{public}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {mapping.GATEWAY_LABEL: "true"} if gateway else {},
            "annotations": annotations,
        },
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
    }


def cluster(cid: str, pods: str, services: str, ns: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "submariner.io/v1",
        "kind": "Cluster",
        "metadata": {"name": cid, "namespace": ns},
        "spec": {"cluster_id": cid, "cluster_cidr": [pods], "service_cidr": [services]},
    }


def endpoint(cid: str, host: str, private: str, public: str | None = None, ns: str = NS) -> dict[str, Any]:
    spec: dict[str, Any] = {"cluster_id": cid, "hostname": host, "private_ip": private, "backend": "vxlan"}
    if public:
        spec["public_ip"] = public
    return {
        "apiVersion": "submariner.io/v1",
        "kind": "Endpoint",
        "metadata": {"name": f"{cid}-{host}", "namespace": ns, "labels": {"submariner.io/clusterID": cid}},
        "spec": spec,
    }


def submariner(multi_active: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "submariner.io/v1alpha1",
        "kind": "Submariner",
        "metadata": {"name": "submariner", "namespace": NS},
        "spec": {"multiActiveGatewayEnabled": multi_active},
    }


def config_map(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "magw-config", "namespace": NS}, "data": data}


def east() -> list[dict[str, Any]]:
    """examples/broker seen from east's API server: east's nodes, both clusters, every Endpoint."""
    return [
        submariner(True),
        config_map(strategy="resilient", underlayMTU="1500"),
        cluster("east", "10.1.0.0/16", "100.1.0.0/16"),
        cluster("west", "10.2.0.0/16", "100.2.0.0/16"),
        node("e-gw1", "172.18.0.6", "10.1.1.1", gateway=True, public="198.51.100.6"),
        node("e-gw2", "172.18.0.8", "10.1.2.1", gateway=True, public="198.51.100.8"),
        node("e-w1", "172.18.0.3", "10.1.3.1"),
        endpoint("east", "e-gw1", "172.18.0.6", "198.51.100.6"),
        endpoint("east", "e-gw2", "172.18.0.8", "198.51.100.8"),
        endpoint("west", "w-gw1", "172.19.0.4", "198.51.100.4"),
    ]
