"""Kubernetes objects of the WireGuard cable: an Endpoint CR's ``backend`` and ``backend_config.publicKey``,
the ConfigMap's ``cable`` and ``wireguardPort``, mapped into the file broker's documents and back."""

from __future__ import annotations

from typing import Any

import pytest

from magw.model.cable import Cable
from magw.sources.file.assemble import assemble
from magw.sources.kube import mapping
from tests.unit.cable.data import W_GW1_PUB


def endpoint_obj(backend: str, backend_config: Any = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "cluster_id": "west",
        "hostname": "w-gw1",
        "private_ip": "172.19.0.4",
        "public_ip": "203.0.113.4",
        "backend": backend,
        "cable_name": "submariner-cable-west-w-gw1",
        **extra,
    }
    if backend_config is not None:
        spec["backend_config"] = backend_config
    return {"metadata": {"name": "west-w-gw1", "namespace": "submariner-operator"}, "spec": spec}


def config_map(**data: str) -> dict[str, Any]:
    return {"metadata": {"name": "magw-config", "namespace": "submariner-operator"}, "data": data}


def test_a_wireguard_endpoint_maps_backend_and_key() -> None:
    obj = endpoint_obj(
        "wireguard", {"publicKey": W_GW1_PUB, "natt-discovery-port": "4490", "preferred-server": "false"}
    )
    (doc,) = mapping.endpoint_docs(obj)
    assert doc.kind == "Endpoint" and doc.file == "kube:Endpoint/submariner-operator/west-w-gw1"
    assert dict(doc.fields) == {
        "cluster": "west",
        "hostname": "w-gw1",
        "private_ip": "172.19.0.4",
        "public_ip": "203.0.113.4",
        "backend": "wireguard",
        "backend_config": {"publicKey": W_GW1_PUB},  # Submariner's other keys stay out
    }


@pytest.mark.parametrize("backend", ["vxlan", "libreswan", ""])
def test_other_backends_map_to_the_vxlan_cable(backend: str) -> None:
    (doc,) = mapping.endpoint_docs(endpoint_obj(backend, {"natt-discovery-port": "4490"}))
    assert "backend" not in doc.fields and "backend_config" not in doc.fields


def test_a_wireguard_endpoint_without_a_key_maps_without_one() -> None:
    """Such a document is refused later, by the snapshot loader, with the field path (a gateway mid-start)."""
    for config in (None, {}, {"publicKey": ""}, "not-a-mapping"):
        (doc,) = mapping.endpoint_docs(endpoint_obj("wireguard", config))
        assert doc.fields["backend"] == "wireguard"
        assert "backend_config" not in doc.fields, config


def test_endpoint_spec_round_trip_keeps_the_cable_fields() -> None:
    fields = {
        "cluster": "west",
        "hostname": "w-gw1",
        "private_ip": "172.19.0.4",
        "public_ip": "203.0.113.4",
        "backend": "wireguard",
        "backend_config": {"publicKey": W_GW1_PUB},
    }
    spec = mapping.endpoint_spec(fields)
    assert spec == {
        "cluster_id": "west",
        "hostname": "w-gw1",
        "private_ip": "172.19.0.4",
        "public_ip": "203.0.113.4",
        "backend": "wireguard",
        "backend_config": {"publicKey": W_GW1_PUB},
    }
    (doc,) = mapping.endpoint_docs({"metadata": {"name": "west-w-gw1"}, "spec": spec})
    assert dict(doc.fields) == fields


def test_endpoint_spec_of_a_vxlan_document_says_vxlan() -> None:
    fields = {"cluster": "west", "hostname": "w-gw1", "private_ip": "172.19.0.4"}
    spec = mapping.endpoint_spec(fields)
    assert spec["backend"] == "vxlan" and "backend_config" not in spec
    (doc,) = mapping.endpoint_docs({"metadata": {"name": "west-w-gw1"}, "spec": spec})
    assert dict(doc.fields) == fields


def test_config_map_cable_and_port() -> None:
    (doc,) = mapping.config_docs(None, config_map(cable="wireguard", wireguardPort="51999"))
    assert dict(doc.fields) == {"multi_active_gateway": False, "cable": "wireguard", "wireguard_port": 51999}
    (doc,) = mapping.config_docs(None, config_map(cable="vxlan"))
    assert dict(doc.fields) == {"multi_active_gateway": False, "cable": "vxlan"}


@pytest.mark.parametrize("port", ["fast", "5e4", "", "51820.0"])
def test_a_bad_wireguard_port_is_a_mapping_error(port: str) -> None:
    with pytest.raises(mapping.MappingError) as info:
        mapping.config_docs(None, config_map(wireguardPort=port))
    assert (
        str(info.value) == f"kube:ConfigMap/submariner-operator/magw-config: wireguardPort: {port!r} is not an integer"
    )


def test_the_mapped_documents_assemble_into_a_wireguard_snapshot() -> None:
    docs: list[Any] = [
        *mapping.config_docs(None, config_map(cable="wireguard", wireguardPort="443")),
        *mapping.cluster_docs(
            {
                "metadata": {"name": "east"},
                "spec": {"cluster_id": "east", "cluster_cidr": ["10.1.0.0/16"], "service_cidr": ["100.1.0.0/16"]},
            }
        ),
        *mapping.cluster_docs(
            {
                "metadata": {"name": "west"},
                "spec": {"cluster_id": "west", "cluster_cidr": ["10.2.0.0/16"], "service_cidr": ["100.2.0.0/16"]},
            }
        ),
        *mapping.endpoint_docs(endpoint_obj("wireguard", {"publicKey": W_GW1_PUB})),
    ]
    assembly = assemble("east", docs, {})
    assert assembly.problems == ()
    snap = assembly.snapshot
    assert snap is not None
    assert (snap.config.cable, snap.config.wireguard_port) == (Cable.WIREGUARD, 443)
    (w_gw1,) = snap.endpoints
    assert (w_gw1.backend, w_gw1.public_key) == (Cable.WIREGUARD, W_GW1_PUB)


def test_an_endpoint_behind_a_load_balancer_keeps_its_public_port() -> None:
    """``backend_config.publicPort`` (docs/load-balancer.md) is kept beside the key, for either backend."""
    (doc,) = mapping.endpoint_docs(endpoint_obj("wireguard", {"publicKey": W_GW1_PUB, "publicPort": "30004"}))
    assert doc.fields["backend_config"] == {"publicKey": W_GW1_PUB, "publicPort": "30004"}
    (doc,) = mapping.endpoint_docs(endpoint_obj("vxlan", {"publicPort": "30004", "natt-discovery-port": "4490"}))
    assert doc.fields["backend_config"] == {"publicPort": "30004"}
    spec = mapping.endpoint_spec(dict(doc.fields))
    assert spec["backend_config"] == {"publicPort": "30004"}


def test_an_endpoint_behind_a_separate_nat_keeps_its_nat_source() -> None:
    """``backend_config.natSourceIP`` (docs/load-balancer.md) is kept with the port, and written back."""
    config = {"publicPort": "30004", "natSourceIP": "203.0.113.50", "natt-discovery-port": "4490"}
    (doc,) = mapping.endpoint_docs(endpoint_obj("vxlan", config))
    assert doc.fields["backend_config"] == {"publicPort": "30004", "natSourceIP": "203.0.113.50"}
    assert mapping.endpoint_spec(dict(doc.fields))["backend_config"] == doc.fields["backend_config"]
