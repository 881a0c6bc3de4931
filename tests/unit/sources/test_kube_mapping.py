"""Kubernetes objects map into the file broker's documents: the same clusterset gives the same Snapshot."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Any

import pytest

from magw.model.globalnet import ObjectRef
from magw.sources.file.assemble import assemble
from magw.sources.file.broker import FileBroker
from magw.sources.kube import mapping
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "broker"


def node(name: str, ip: str | None, cni: str | None, *, gateway: bool = False, public: str | None = None) -> Any:
    annotations = {}
    if cni:
        annotations[mapping.CNI_IP_ANNOTATION] = cni
    if public:
        annotations[mapping.PUBLIC_IP_ANNOTATION] = public
    return {
        "metadata": {
            "name": name,
            "labels": {mapping.GATEWAY_LABEL: "true"} if gateway else {"kubernetes.io/os": "linux"},
            "annotations": annotations,
        },
        "status": {
            "addresses": ([{"type": "InternalIP", "address": ip}] if ip else [])
            + [{"type": "Hostname", "address": name}]
        },
    }


def cluster(cid: str, pods: str, services: str) -> Any:
    return {
        "metadata": {"name": cid, "namespace": "submariner-operator"},
        "spec": {"cluster_id": cid, "cluster_cidr": [pods], "service_cidr": [services], "color_codes": ["blue"]},
    }


def endpoint(cid: str, host: str, private: str, public: str) -> Any:
    return {
        "metadata": {"name": f"{cid}-{host}", "namespace": "submariner-operator"},
        "spec": {
            "cluster_id": cid,
            "hostname": host,
            "private_ip": private,
            "public_ip": public,
            "backend": "vxlan",
            "cable_name": f"submariner-cable-{cid}-{host}",
        },
    }


def kube_docs() -> list[Any]:
    """examples/broker, as the objects a Kubernetes deployment holds."""
    docs: list[Any] = []
    submariner = {"metadata": {"name": "submariner"}, "spec": {"multiActiveGatewayEnabled": True}}
    config_map = {"metadata": {"name": "magw-config"}, "data": {"strategy": "resilient", "underlayMTU": "1500"}}
    docs += mapping.config_docs(submariner, config_map)
    docs += mapping.cluster_docs(cluster("east", "10.1.0.0/16", "100.1.0.0/16"))
    docs += mapping.cluster_docs(cluster("west", "10.2.0.0/16", "100.2.0.0/16"))
    for args in (
        ("e-gw1", "172.18.0.6", "10.1.1.1", True, "ipv4:198.51.100.6"),
        ("e-gw2", "172.18.0.8", "10.1.2.1", True, "198.51.100.8"),
        ("e-w1", "172.18.0.3", "10.1.3.1", False, None),
    ):
        docs += mapping.node_docs(node(*args[:3], gateway=args[3], public=args[4]), "east")
    docs += mapping.endpoint_docs(endpoint("east", "e-gw1", "172.18.0.6", "198.51.100.6"))
    docs += mapping.endpoint_docs(endpoint("east", "e-gw2", "172.18.0.8", "198.51.100.8"))
    docs += mapping.endpoint_docs(endpoint("west", "w-gw1", "172.19.0.4", "198.51.100.4"))
    return docs


def test_the_example_clusterset_gives_the_file_brokers_snapshot() -> None:
    broker = FileBroker(EXAMPLE, local_cluster="east")
    broker.scan()
    assembly = assemble("east", kube_docs(), {})
    assert assembly.problems == ()
    assert assembly.snapshot is not None and broker.snapshot is not None
    assert assembly.snapshot == broker.snapshot
    gw = next(d for d in kube_docs() if d.ident == ("Node", "east", "e-gw1"))
    assert gw.fields["public_ip"] == "198.51.100.6"  # the ipv4: prefix Submariner writes is understood


def test_multi_active_defaults_to_false_as_in_the_seed() -> None:
    (doc,) = mapping.config_docs(None, None)
    assert doc.fields == {"multi_active_gateway": False}
    (doc,) = mapping.config_docs({"spec": {"multiActiveGatewayEnabled": True}}, None)
    assert doc.fields["multi_active_gateway"] is True


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (node("n1", None, "10.1.1.1"), "no InternalIP"),
        (node("n1", "172.18.0.9", None), "cniIfaceIp annotation yet"),
        (node("n1", "172.18.0.9", "10.1.1.1", public="dns:gw.example"), "is not ipv4:<address>"),
    ],
)
def test_a_node_that_cannot_be_used_yet_is_one_line_naming_it(obj: Any, reason: str) -> None:
    with pytest.raises(mapping.MappingError) as err:
        mapping.node_docs(obj, "east")
    assert reason in str(err.value) and "kube:Node/n1" in str(err.value) and "\n" not in str(err.value)


def test_bad_config_map_values_are_refused_with_the_key() -> None:
    with pytest.raises(mapping.MappingError, match="underlayMTU: 'big'"):
        mapping.config_docs(None, {"metadata": {"name": "magw-config"}, "data": {"underlayMTU": "big"}})


def svc(name: str, cluster_ip: str, **spec: Any) -> Any:
    return {"metadata": {"name": name, "namespace": "web"}, "spec": {"clusterIP": cluster_ip, **spec}}


def piece(service: str, *endpoints: tuple[str, bool | None], kind: str = "IPv4") -> Any:
    eps = []
    for address, ready in endpoints:
        ep: dict[str, Any] = {"addresses": [address]}
        if ready is not None:
            ep["conditions"] = {"ready": ready}
        eps.append(ep)
    return {
        "metadata": {"name": f"{service}-x", "namespace": "web", "labels": {mapping.SERVICE_NAME_LABEL: service}},
        "addressType": kind,
        "endpoints": eps,
    }


def test_services_take_their_ready_slice_addresses_and_headless_has_no_cluster_ip() -> None:
    slices = [
        piece("db", ("10.1.1.5", True), ("10.1.1.6", False), ("10.1.2.9", None)),
        piece("db", ("fd00::1", True), kind="IPv6"),
    ]
    spec = {"ports": [{"port": 5432, "targetPort": "pg"}]}  # headless, no selector: its slices name the backends
    (doc,) = mapping.service_docs(svc("db", "None", **spec), "east", slices)
    assert "cluster_ip" not in doc.fields
    assert doc.fields["endpoint_addresses"] == ["10.1.1.5", "10.1.2.9"]  # not-ready left out; absent = ready
    assert doc.fields["ports"] == [{"port": 5432, "protocol": "TCP"}]  # a named target port is not ours
    (doc,) = mapping.service_docs(svc("db", "None", publishNotReadyAddresses=True, **spec), "east", slices)
    assert doc.fields["endpoint_addresses"] == ["10.1.1.5", "10.1.1.6", "10.1.2.9"]
    # with a selector (or a ClusterIP) the model finds the backends from the pods: no addresses, and it parses
    for service in (svc("db", "None", selector={"app": "db"}), svc("web", "100.1.0.20", selector={"app": "web"})):
        (doc,) = mapping.service_docs(service, "east", [piece(service["metadata"]["name"], ("10.1.1.7", True))])
        assert "endpoint_addresses" not in doc.fields
        assert assemble("east", [*kube_docs(), doc], {}).problems == ()
    (doc,) = mapping.service_docs(svc("api", "100.1.0.10", ports=[{"port": 80, "targetPort": 8080}]), "east")
    assert doc.fields["cluster_ip"] == "100.1.0.10" and doc.fields["ports"][0]["target_port"] == 8080


def test_globalnet_objects_and_their_status_become_two_documents() -> None:
    obj = {
        "metadata": {"name": "db-egress", "namespace": "web", "generation": 3},
        "spec": {"numberOfIPs": 2, "podSelector": {"matchLabels": {"app": "db"}}},
        "status": {
            "allocatedIPs": ["242.1.0.8", "242.1.0.9"],
            "conditions": [
                {
                    "type": "Allocated",
                    "status": "True",
                    "reason": "Success",
                    "message": "2 addresses",
                    "lastTransitionTime": "2026-11-23T10:00:00Z",
                    "observedGeneration": 3,
                }
            ],
        },
    }
    spec_doc, status_doc = mapping.globalnet_docs("GlobalEgressIP", obj, "east")
    assert spec_doc.ident == ("GlobalEgressIP", "east", "web", "db-egress")
    assert spec_doc.fields["numberOfIPs"] == 2
    assert status_doc.ident == ("GlobalnetStatus", "east", "GlobalEgressIP", "web", "db-egress")
    assert "observedGeneration" not in status_doc.fields["conditions"][0]
    snap = assemble("east", [*kube_docs(), spec_doc, status_doc], {}).snapshot
    assert snap is not None
    st = snap.globalnet.status_of(ObjectRef("GlobalEgressIP", "web", "db-egress"))
    assert st is not None and st.allocated_ips == (IPv4Address("242.1.0.8"), IPv4Address("242.1.0.9"))
    # no status yet: only the spec's document
    assert len(mapping.globalnet_docs("GlobalEgressIP", {**obj, "status": {}}, "east")) == 1


def test_a_headless_pods_global_ingress_ip_names_its_pod() -> None:
    obj = {
        "metadata": {"name": "pod-db-0", "namespace": "web"},
        "spec": {
            "target": "HeadlessServicePod",
            "serviceName": "db",
            "objRef": {"name": "db-0"},
            "targetIP": "10.1.1.5",
        },
        "status": {"allocatedIP": "242.1.0.20", "conditions": []},
    }
    spec_doc, status_doc = mapping.globalnet_docs("GlobalIngressIP", obj, "east")
    assert spec_doc.fields["targetRef"] == {"kind": "Pod", "namespace": "web", "name": "db-0"}
    assert status_doc.fields["allocatedIP"] == "242.1.0.20"


def test_endpoint_spec_is_the_inverse_of_endpoint_docs() -> None:
    fields = {"cluster": "east", "hostname": "e-gw1", "private_ip": "172.18.0.6", "allocated_ips": ["242.1.0.1"]}
    obj = {"metadata": {"name": "east-e-gw1"}, "spec": mapping.endpoint_spec(fields)}
    (doc,) = mapping.endpoint_docs(obj)
    assert dict(doc.fields) == fields
    assert mapping.endpoint_object_name("East", "E-GW1") == "east-e-gw1"


def test_cluster_global_cidrs_are_kept() -> None:
    obj = cluster("east", "10.1.0.0/16", "100.1.0.0/16")
    obj["spec"]["global_cidr"] = ["242.1.0.0/16"]
    (doc,) = mapping.cluster_docs(obj)
    snap = assemble("east", [doc], {}).snapshot
    assert snap is not None and snap.clusters[0].global_cidrs == (IPv4Network("242.1.0.0/16"),)


def test_a_cluster_global_egress_ips_status_names_no_namespace() -> None:
    """The model's ClusterGlobalEgressIP is cluster-wide although its object lives in magw's namespace: its status
    must name it as the controller does, or the controller would release what it just wrote."""
    obj = {
        "metadata": {"name": "e-gw1-cluster-egress.submariner.io", "namespace": "submariner-operator"},
        "spec": {"numberOfIPs": 8},
        "status": {"allocatedIPs": ["242.1.0.1"], "conditions": []},
    }
    spec_doc, status_doc = mapping.globalnet_docs("ClusterGlobalEgressIP", obj, "east")
    assert spec_doc.ident == ("ClusterGlobalEgressIP", "east", "e-gw1-cluster-egress.submariner.io")
    assert status_doc.ident == ("GlobalnetStatus", "east", "ClusterGlobalEgressIP", "", spec_doc.ident[2])


# ----- a Node's pod CIDRs and the ConfigMap's keepClientIP (docs/client-ip.md) ----------------------------------


def node_with(spec: Any) -> Any:
    obj = node("e-w1", "172.18.0.3", "10.1.3.1")
    if spec is not None:
        obj["spec"] = spec
    return obj


@pytest.mark.parametrize(
    ("spec", "cidrs"),
    [
        ({"podCIDR": "10.1.3.0/24", "podCIDRs": ["10.1.3.0/24"]}, ["10.1.3.0/24"]),
        ({"podCIDRs": ["10.1.3.0/24", "10.9.0.0/26"]}, ["10.1.3.0/24", "10.9.0.0/26"]),  # podCIDRs wins, in order
        ({"podCIDR": "10.1.3.0/24"}, ["10.1.3.0/24"]),  # an older API server: podCIDR alone
        ({"podCIDR": "10.1.3.0/24", "podCIDRs": []}, ["10.1.3.0/24"]),
        ({"podCIDRs": ["fd00:10:244:3::/64", "10.1.3.0/24"]}, ["10.1.3.0/24"]),  # dual stack: IPv6 left out
        ({"podCIDRs": ["10.1.3.7/24"]}, ["10.1.3.0/24"]),  # host bits cleared, as Kubernetes reads it
    ],
)
def test_a_nodes_ipv4_pod_cidrs_are_mapped(spec: Any, cidrs: list[str]) -> None:
    (doc,) = mapping.node_docs(node_with(spec), "east")
    assert doc.fields["pod_cidrs"] == cidrs
    snap = assemble("east", [*(d for d in kube_docs() if d.ident != doc.ident), doc], {}).snapshot
    assert snap is not None
    assert next(n for n in snap.nodes if n.name == "e-w1").pod_cidrs == tuple(IPv4Network(c) for c in cidrs)


@pytest.mark.parametrize(
    "spec",
    [None, {}, {"podCIDRs": []}, {"podCIDR": ""}, {"podCIDRs": None, "podCIDR": None}, {"podCIDRs": ["fd00::/64"]}],
)
def test_a_node_without_ipv4_pod_cidrs_has_no_key(spec: Any) -> None:
    """Absent, not empty: a build without the field refuses a Node document that has it."""
    (doc,) = mapping.node_docs(node_with(spec), "east")
    assert "pod_cidrs" not in doc.fields
    assert doc.fields == next(d for d in kube_docs() if d.ident == doc.ident).fields


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"podCIDRs": ["10.1.300.0/24"]}, "spec.podCIDRs: '10.1.300.0/24' is not a CIDR"),
        ({"podCIDRs": ["10.1.3.0/24", "banana"]}, "spec.podCIDRs: 'banana' is not a CIDR"),
        ({"podCIDRs": ["10.1.3.0"]}, "spec.podCIDRs: '10.1.3.0' is not a CIDR"),  # no prefix: not a CIDR
        ({"podCIDRs": [""]}, "spec.podCIDRs: '' is not a CIDR"),
        ({"podCIDRs": [5]}, "spec.podCIDRs: 5 is not a CIDR"),  # ipaddress would read an int as an address
        ({"podCIDR": "10.1.3.0/33"}, "spec.podCIDR: '10.1.3.0/33' is not a CIDR"),
        ({"podCIDRs": "10.1.3.0/24"}, "spec.podCIDRs: '10.1.3.0/24' is not a list of CIDRs"),
    ],
)
def test_a_malformed_pod_cidr_refuses_the_node_in_one_line(spec: Any, reason: str) -> None:
    """As a malformed public IP annotation: a MappingError naming the object (its last good documents stay)."""
    with pytest.raises(mapping.MappingError) as err:
        mapping.node_docs(node_with(spec), "east")
    assert str(err.value) == f"kube:Node/e-w1: {reason}"
    assert not isinstance(err.value, mapping.NotYet)


def magw_config(**data: Any) -> Any:
    return {"metadata": {"name": "magw-config", "namespace": "submariner-operator"}, "data": data}


@pytest.mark.parametrize(("value", "keep"), [("true", True), ("false", False), ("True", True), ("FALSE", False)])
def test_keep_client_ip_comes_from_the_config_map(value: str, keep: bool) -> None:
    (doc,) = mapping.config_docs(None, magw_config(keepClientIP=value))
    assert dict(doc.fields) == {"multi_active_gateway": False, "keep_client_ip": keep}
    others = [d for d in kube_docs() if d.kind != "Config"]
    snap = assemble("east", [doc, *others], {}).snapshot
    assert snap is not None and snap.config.keep_client_ip is keep


def test_keep_client_ip_absent_is_off_and_no_key() -> None:
    (doc,) = mapping.config_docs(None, magw_config(strategy="resilient"))
    assert "keep_client_ip" not in doc.fields
    snap = assemble("east", kube_docs(), {}).snapshot
    assert snap is not None and snap.config.keep_client_ip is False


@pytest.mark.parametrize("value", ["yes", "1", "", "on", True, 1, None, ["true"]])
def test_a_bad_keep_client_ip_is_a_mapping_error(value: Any) -> None:
    with pytest.raises(mapping.MappingError) as err:
        mapping.config_docs(None, magw_config(keepClientIP=value))
    where = "kube:ConfigMap/submariner-operator/magw-config"
    assert str(err.value) == f"{where}: keepClientIP: {value!r} is not true or false"
