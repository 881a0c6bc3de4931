"""Patches and the status subresource on the emulator, through kubernetes-asyncio.

Pinned to "API Concepts" ("Patch", "Conflicts"), "Update API Objects in Place Using kubectl patch"
(https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/) and the CRD
docs' "Status subresource" (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/
custom-resource-definitions/#status-subresource), plus the RFCs of the two patch formats.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiException, CoreV1Api, CustomObjectsApi

from magw.kubeemu import Emulator
from magw.kubeemu.patch import PatchError, json_patch, merge_patch
from tests.support import kubeemu_fixtures
from tests.support.kubeemu_fixtures import NAMESPACE

kube, kube_env = kubeemu_fixtures.kube, kubeemu_fixtures.kube_env  # the fixtures, by name

Kube = tuple[Emulator, Any]
MERGE = "application/merge-patch+json"
GW = ("submariner.io", "v1", NAMESPACE, "gateways")


def _gateway(name: str = "gw1") -> dict[str, Any]:
    return {
        "apiVersion": "submariner.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "labels": {"a": "1"}},
        "spec": {"x": 1, "list": [1, 2, 3]},
        "status": {"haStatus": "active"},
    }


# --- the patch formats themselves (pure) ----------------------------------------------------------------------


def test_merge_patch_rfc7386_examples() -> None:
    """RFC 7386 Appendix A: objects merge, null deletes, arrays and scalars replace."""
    cases = [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ]
    for target, patch, result in cases:
        before = json.dumps(target)
        assert merge_patch(target, patch) == result
        assert json.dumps(target) == before  # the input is not modified


def test_json_patch_rfc6902_operations_and_all_or_nothing() -> None:
    """RFC 6902 section 4 operations, JSON Pointer escapes (RFC 6901), and a failing op fails the whole patch."""
    doc = {"foo": ["bar", "baz"], "a/b": 1, "m~n": 2}
    ops = [
        {"op": "add", "path": "/foo/1", "value": "qux"},
        {"op": "add", "path": "/foo/-", "value": "end"},
        {"op": "remove", "path": "/a~1b"},
        {"op": "replace", "path": "/m~0n", "value": 3},
        {"op": "copy", "from": "/foo/0", "path": "/first"},
        {"op": "move", "from": "/first", "path": "/moved"},
        {"op": "test", "path": "/moved", "value": "bar"},
    ]
    assert json_patch(doc, ops) == {"foo": ["bar", "qux", "baz", "end"], "m~n": 3, "moved": "bar"}
    assert doc == {"foo": ["bar", "baz"], "a/b": 1, "m~n": 2}
    with pytest.raises(PatchError) as failed:
        json_patch(doc, [{"op": "add", "path": "/x", "value": 1}, {"op": "test", "path": "/x", "value": 2}])
    assert not failed.value.malformed
    for bad in ([{"op": "remove", "path": "/missing"}], [{"op": "replace", "path": "/foo/5", "value": 1}]):
        with pytest.raises(PatchError):
            json_patch(doc, bad)
    with pytest.raises(PatchError) as malformed:
        json_patch(doc, {"op": "add"})
    assert malformed.value.malformed


# --- through the API ------------------------------------------------------------------------------------------


async def test_merge_patch_versus_json_patch_on_a_custom_resource(kube: Kube) -> None:
    """ "Patch": a merge patch replaces lists and deletes keys set to null; a JSON patch edits in place."""
    _, client = kube
    custom = CustomObjectsApi(client)
    await custom.create_namespaced_custom_object(*GW, _gateway())
    merged = await custom.patch_namespaced_custom_object(
        *GW, "gw1", {"spec": {"list": [9], "x": None, "y": 2}}, _content_type=MERGE
    )
    assert merged["spec"] == {"list": [9], "y": 2}
    patched = await custom.patch_namespaced_custom_object(
        *GW, "gw1", [{"op": "add", "path": "/spec/list/0", "value": 8}, {"op": "remove", "path": "/spec/y"}]
    )
    assert patched["spec"] == {"list": [8, 9]}
    assert patched["metadata"]["generation"] == 3


async def test_a_dict_body_without_content_type_goes_as_json_patch_and_is_a_400(kube: Kube) -> None:
    """kubernetes-asyncio sends a dict body to a custom object's patch as application/json-patch+json unless
    ``_content_type`` says otherwise; a JSON patch must be a list, so the server answers 400 (as a real one)."""
    _, client = kube
    custom = CustomObjectsApi(client)
    await custom.create_namespaced_custom_object(*GW, _gateway())
    with pytest.raises(ApiException) as err:
        await custom.patch_namespaced_custom_object_status(*GW, "gw1", {"status": {"haStatus": "passive"}})
    assert err.value.status == 400


async def test_strategic_merge_patch_is_merge_for_builtin_and_415_for_custom_resources(kube: Kube) -> None:
    """Strategic merge patch exists for built-in types only ("Notes on the strategic merge patch"); a custom
    resource answers 415 Unsupported Media Type. The emulator applies it as a merge patch (no keyed lists)."""
    _, client = kube
    core, custom = CoreV1Api(client), CustomObjectsApi(client)
    await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}})
    cm = await core.patch_namespaced_config_map("c", NAMESPACE, {"data": {"b": None, "c": "3"}})  # strategic
    assert cm.data == {"a": "1", "c": "3"}
    await custom.create_namespaced_custom_object(*GW, _gateway())
    with pytest.raises(ApiException) as err:
        await custom.patch_namespaced_custom_object(
            *GW, "gw1", {"spec": {"x": 2}}, _content_type="application/strategic-merge-patch+json"
        )
    assert err.value.status == 415


async def test_patch_carrying_a_stale_resource_version_is_409(kube: Kube) -> None:
    """ "Conflicts": a patch that sets metadata.resourceVersion is checked like an update; stale is 409. A
    patch without one applies to the current object whatever its version."""
    _, client = kube
    custom = CustomObjectsApi(client)
    created = await custom.create_namespaced_custom_object(*GW, _gateway())
    stale = created["metadata"]["resourceVersion"]
    await custom.patch_namespaced_custom_object(*GW, "gw1", {"spec": {"x": 2}}, _content_type=MERGE)
    with pytest.raises(ApiException) as err:
        await custom.patch_namespaced_custom_object(
            *GW, "gw1", {"metadata": {"resourceVersion": stale}, "spec": {"x": 3}}, _content_type=MERGE
        )
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    current = await custom.get_namespaced_custom_object(*GW, "gw1")
    assert current["spec"]["x"] == 2
    ok = await custom.patch_namespaced_custom_object(
        *GW,
        "gw1",
        {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}, "spec": {"x": 4}},
        _content_type=MERGE,
    )
    assert ok["spec"]["x"] == 4


async def test_failed_json_patch_test_is_422_and_changes_nothing(kube: Kube) -> None:
    """A JSON patch is atomic (RFC 6902 section 5): a failing ``test`` rejects all of it (422)."""
    _, client = kube
    custom = CustomObjectsApi(client)
    before = await custom.create_namespaced_custom_object(*GW, _gateway())
    ops = [{"op": "replace", "path": "/spec/x", "value": 5}, {"op": "test", "path": "/spec/x", "value": 6}]
    with pytest.raises(ApiException) as err:
        await custom.patch_namespaced_custom_object(*GW, "gw1", ops)
    assert err.value.status == 422
    after = await custom.get_namespaced_custom_object(*GW, "gw1")
    assert after == before


async def test_status_subresource_separation_both_ways_on_a_custom_resource(kube: Kube) -> None:
    """ "Status subresource": PUT/PATCH of the main resource ignore .status; PUT/PATCH of /status ignore all
    but .status (labels included). A status write leaves generation alone; create drops the status."""
    _, client = kube
    custom = CustomObjectsApi(client)
    created = await custom.create_namespaced_custom_object(*GW, _gateway())
    assert "status" not in created
    st = await custom.patch_namespaced_custom_object_status(
        *GW,
        "gw1",
        {"status": {"haStatus": "passive"}, "spec": {"x": 99}, "metadata": {"labels": {"b": "2"}}},
        _content_type=MERGE,
    )
    assert st["status"] == {"haStatus": "passive"} and st["spec"]["x"] == 1
    assert st["metadata"]["labels"] == {"a": "1"} and st["metadata"]["generation"] == 1
    main = await custom.patch_namespaced_custom_object(
        *GW, "gw1", {"status": {"haStatus": "active"}, "spec": {"x": 2}}, _content_type=MERGE
    )
    assert main["status"] == {"haStatus": "passive"} and main["spec"]["x"] == 2
    main["status"] = {"haStatus": "active"}
    main["spec"]["x"] = 3
    replaced = await custom.replace_namespaced_custom_object(*GW, "gw1", main)
    assert replaced["status"] == {"haStatus": "passive"} and replaced["spec"]["x"] == 3
    replaced["status"] = {"haStatus": "active"}
    replaced["spec"]["x"] = 4
    put_status = await custom.replace_namespaced_custom_object_status(*GW, "gw1", replaced)
    assert put_status["status"] == {"haStatus": "active"} and put_status["spec"]["x"] == 3
    got = await custom.get_namespaced_custom_object_status(*GW, "gw1")
    assert got == put_status


async def test_status_subresource_of_builtin_types_nodes_keep_status_on_create(kube: Kube) -> None:
    """Built-in types with a status subresource behave alike (Pods, Nodes); a Node may be created with its
    status (the kubelet registers nodes that way), a Pod's status on create is dropped."""
    _, client = kube
    core = CoreV1Api(client)
    addresses = [{"type": "InternalIP", "address": "172.18.0.6"}]
    node = await core.create_node({"metadata": {"name": "n1"}, "status": {"addresses": addresses}})
    assert node.status.addresses[0].address == "172.18.0.6"
    patched = await core.patch_node(
        "n1", {"metadata": {"labels": {"submariner.io/gateway": "true"}}, "status": {"addresses": []}}
    )
    assert patched.status.addresses[0].address == "172.18.0.6"
    assert patched.metadata.labels == {"submariner.io/gateway": "true"}
    pod = await core.create_namespaced_pod(
        NAMESPACE, {"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"podIP": "10.1.1.5"}}
    )
    assert pod.status is None or pod.status.pod_ip is None
    ready = await core.patch_namespaced_pod_status(
        "p", NAMESPACE, {"status": {"podIP": "10.1.1.5"}}, _content_type=MERGE
    )
    assert ready.status.pod_ip == "10.1.1.5"


async def test_patch_of_a_missing_object_is_404(kube: Kube) -> None:
    _, client = kube
    with pytest.raises(ApiException) as err:
        await CustomObjectsApi(client).patch_namespaced_custom_object(*GW, "nope", {"spec": {}}, _content_type=MERGE)
    assert err.value.status == 404


async def test_a_protobuf_body_it_cannot_decode_is_415(kube: Kube) -> None:
    """The emulator decodes protobuf only for what kubectl creates that way (Namespace, ConfigMap: see
    magw.kubeemu.protobuf); a Pod with a spec is 415 Unsupported Media Type, not 400, and creates nothing."""
    _, client = kube
    core = CoreV1Api(client)
    pod_raw = b"\n\x03\n\x01p" + b"\x12\x04\x12\x02\n\x00"  # metadata {name: p}, spec {containers: [{}]}
    body = b"k8s\x00\n\x08\n\x02v1\x12\x03Pod" + b"\x12" + bytes([len(pod_raw)]) + pod_raw
    with pytest.raises(ApiException) as err:
        await client.call_api(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            "POST",
            header_params={"Content-Type": "application/vnd.kubernetes.protobuf", "Accept": "application/json"},
            body=body,
        )
    assert err.value.status == 415
    assert json.loads(err.value.body)["reason"] == "UnsupportedMediaType"
    assert "p" not in [p.metadata.name for p in (await core.list_namespaced_pod(NAMESPACE)).items]
