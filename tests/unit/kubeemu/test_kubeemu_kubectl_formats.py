"""What the emulator gives kubectl, without kubectl: protobuf bodies, Table cells, OpenAPI, field validation."""

from __future__ import annotations

import datetime

import pytest

from magw.kubeemu import Emulator, openapi, protobuf, table
from magw.kubeemu.resources import Registry, from_crd
from tests.support.kubectl_emulator import crd_docs

# The body `kubectl create namespace foo` (1.37) sent, from its -v=9 log.
KUBECTL_NAMESPACE = bytes.fromhex(
    "6b3873000a0f0a02763112094e616d657370616365121b0a130a03666f6f12001a0022002a0032003800420012001a020a001a002200"
)


def test_decodes_kubectls_namespace_body() -> None:
    decoded = protobuf.decode(KUBECTL_NAMESPACE)
    assert decoded == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foo"}, "spec": {}}


def test_refuses_what_it_does_not_know() -> None:
    with pytest.raises(protobuf.UnknownProtobuf):
        protobuf.decode(b"not protobuf")
    pod = b"\n\x03\n\x01p" + b"\x12\x04\x12\x02\n\x00"  # a Pod with a container in its spec
    with pytest.raises(protobuf.UnknownProtobuf):
        protobuf.decode(b"k8s\x00\n\x08\n\x02v1\x12\x03Pod\x12" + bytes([len(pod)]) + pod)


def test_jsonpath_subset() -> None:
    obj = {"status": {"conditions": [{"type": "A", "status": "x"}, {"type": "Ready", "status": "True"}],
                      "connections": [{"status": "up"}, {"status": "down"}]}}  # fmt: skip
    assert table.jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status') == ["True"]
    assert table.jsonpath(obj, ".status.connections[*].status") == ["up", "down"]
    assert table.jsonpath(obj, ".status.connections[1].status") == ["down"]
    assert table.jsonpath(obj, ".status.missing.deeper") == []


def test_age() -> None:
    now = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
    assert table.age("2026-01-01T11:59:50Z", now) == "10s"
    assert table.age("2026-01-01T11:55:00Z", now) == "5m"
    assert table.age("2026-01-01T09:00:00Z", now) == "3h"
    assert table.age("2025-12-28T12:00:00Z", now) == "4d"
    assert table.age("never", now) == "<unknown>"


def test_table_of_a_crd_uses_its_columns_and_joins_many_values() -> None:
    (rt,) = [t for d in crd_docs() if d["spec"]["names"]["plural"] == "gateways" for t in from_crd(d)]
    gw = {"metadata": {"name": "gw1", "creationTimestamp": "2026-01-01T00:00:00Z"},
          "status": {"haStatus": "active", "connections": [{"status": "connected"}, {"status": "error"}]}}  # fmt: skip
    t = table.table(rt, [gw], {"resourceVersion": "3"})
    names = [c["name"] for c in t["columnDefinitions"]]
    assert names[:3] == ["Name", "HA-Status", "Connections"]
    cells = dict(zip(names, t["rows"][0]["cells"], strict=True))
    assert cells["Name"] == "gw1" and cells["HA-Status"] == "active" and cells["Connections"] == "connected,error"


def test_openapi_index_and_group_version_document() -> None:
    registry = Registry()
    for doc in crd_docs():
        for rt in from_crd(doc):
            registry.add(rt)
    index = openapi.document(registry, [])
    assert index is not None
    url = index["paths"]["apis/submariner.io/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/submariner.io/v1?hash=")
    doc = openapi.document(registry, ["apis", "submariner.io", "v1"])
    assert doc is not None
    patch = doc["paths"]["/apis/submariner.io/v1/namespaces/{namespace}/globalegressips/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "submariner.io", "version": "v1",
                                                        "kind": "GlobalEgressIP"}  # fmt: skip
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert openapi.document(registry, ["apis", "nope.io", "v1"]) is None


def test_unknown_fields_follow_the_schema() -> None:
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"n": {"type": "integer"},
                 "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                 "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                 "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}},
    }}  # fmt: skip
    body = {"apiVersion": "v1", "kind": "K", "metadata": {"name": "x"},
            "spec": {"n": 1, "m": 2, "labels": {"any": "x"}, "free": {"any": {"thing": 1}},
                     "list": [{"a": "1"}, {"b": "2"}]}}  # fmt: skip
    assert list(openapi.unknown_fields(schema, body)) == ["spec.m", "spec.list[1].b"]
    assert list(openapi.unknown_fields(None, body)) == []


def test_emulator_keeps_crd_columns_and_schema() -> None:
    emulator = Emulator(socket_path="/nonexistent/unused.sock")
    doc = next(d for d in crd_docs() if d["spec"]["names"]["plural"] == "globalegressips")
    (rt,) = emulator.add_crd(doc)
    version = doc["spec"]["versions"][0]
    assert [c["name"] for c in rt.columns] == [c["name"] for c in version["additionalPrinterColumns"]]
    assert rt.schema == version["schema"]["openAPIV3Schema"]
