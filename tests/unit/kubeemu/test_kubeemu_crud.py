"""The emulator's reads and writes through the real kubernetes-asyncio client.

Each test names the Kubernetes API documentation it pins (https://kubernetes.io/docs/reference/using-api/
api-concepts/ unless said otherwise).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio.client import (
    ApiException,
    CoordinationV1Api,
    CoreV1Api,
    CustomObjectsApi,
    DiscoveryV1Api,
)

from magw.kubeemu import Emulator
from tests.support import kubeemu_fixtures
from tests.support.kubeemu_fixtures import NAMESPACE

kube, kube_env = kubeemu_fixtures.kube, kubeemu_fixtures.kube_env  # the fixtures, by name

Kube = tuple[Emulator, Any]
MERGE = "application/merge-patch+json"


def _status(err: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(err.body)
    return body


def _endpoint(name: str, cluster: str = "east") -> dict[str, Any]:
    return {
        "apiVersion": "submariner.io/v1",
        "kind": "Endpoint",
        "metadata": {"name": name},
        "spec": {"cluster_id": cluster, "hostname": name, "private_ip": "172.18.0.6"},
    }


async def test_create_sets_metadata_and_one_global_resource_version(kube: Kube) -> None:
    """ "Resource versions": one counter for every type (etcd's revision); every write takes the next value.
    Create fills uid, creationTimestamp, generation 1 and resourceVersion."""
    _, client = kube
    core, custom = CoreV1Api(client), CustomObjectsApi(client)
    ns = await core.create_namespace({"metadata": {"name": NAMESPACE}})
    cm = await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "magw-config"}, "data": {"a": "1"}})
    ep = await custom.create_namespaced_custom_object("submariner.io", "v1", NAMESPACE, "endpoints", _endpoint("e1"))
    rvs = [int(ns.metadata.resource_version), int(cm.metadata.resource_version), int(ep["metadata"]["resourceVersion"])]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    assert ep["metadata"]["generation"] == 1 and ep["metadata"]["uid"] and ep["metadata"]["creationTimestamp"]
    assert ep["metadata"]["namespace"] == NAMESPACE
    assert cm.metadata.uid != ns.metadata.uid


async def test_create_twice_is_409_already_exists_and_get_missing_is_404(kube: Kube) -> None:
    """ "Conflicts"/API errors: an existing name is 409 AlreadyExists, a missing object 404 NotFound, both as
    a Status object (kind Status, apiVersion v1, status Failure, reason, code, message)."""
    _, client = kube
    core = CoreV1Api(client)
    await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "x"}})
    with pytest.raises(ApiException) as dup:
        await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "x"}})
    assert dup.value.status == 409
    body = _status(dup.value)
    assert (body["kind"], body["apiVersion"], body["status"], body["reason"], body["code"]) == (
        "Status",
        "v1",
        "Failure",
        "AlreadyExists",
        409,
    )
    assert body["message"] == 'configmaps "x" already exists'
    with pytest.raises(ApiException) as missing:
        await CoordinationV1Api(client).read_namespaced_lease("nope", NAMESPACE)
    assert missing.value.status == 404
    assert _status(missing.value)["reason"] == "NotFound"
    assert _status(missing.value)["message"] == 'leases.coordination.k8s.io "nope" not found'


async def test_list_per_namespace_and_across_namespaces_with_the_list_resource_version(kube: Kube) -> None:
    """ "Efficient detection of changes": a list carries metadata.resourceVersion, the version the list is
    consistent at (here: the newest write); per-namespace and all-namespaces collections."""
    _, client = kube
    disc = DiscoveryV1Api(client)
    for ns, name in (("a", "s1"), ("b", "s2"), ("a", "s3")):
        body = {"metadata": {"name": name}, "addressType": "IPv4", "endpoints": []}
        last = await disc.create_namespaced_endpoint_slice(ns, body)
    in_a = await disc.list_namespaced_endpoint_slice("a")
    assert [i.metadata.name for i in in_a.items] == ["s1", "s3"]
    assert in_a.metadata.resource_version == last.metadata.resource_version
    everywhere = await disc.list_endpoint_slice_for_all_namespaces()
    assert sorted((i.metadata.namespace, i.metadata.name) for i in everywhere.items) == [
        ("a", "s1"),
        ("a", "s3"),
        ("b", "s2"),
    ]


async def test_list_items_of_builtin_types_have_no_kind_custom_resources_do(kube: Kube) -> None:
    """A real server's typed list encoder drops each item's kind/apiVersion; custom resources keep theirs.
    A client that relies on item.kind of a Node list would break on a real cluster, so it breaks here too."""
    _, client = kube
    await CoreV1Api(client).create_node({"metadata": {"name": "n1"}})
    await CustomObjectsApi(client).create_namespaced_custom_object(
        "submariner.io", "v1", NAMESPACE, "endpoints", _endpoint("e1")
    )
    raw = await CoreV1Api(client).list_node(_preload_content=False)
    nodes = json.loads(await raw.read())
    assert nodes["kind"] == "NodeList" and "kind" not in nodes["items"][0]
    eps = await CustomObjectsApi(client).list_namespaced_custom_object("submariner.io", "v1", NAMESPACE, "endpoints")
    assert eps["kind"] == "EndpointList" and eps["items"][0]["kind"] == "Endpoint"


async def test_replace_with_stale_resource_version_is_409_conflict(kube: Kube) -> None:
    """ "Conflicts" (optimistic concurrency): an update carrying a metadata.resourceVersion other than the
    current one is rejected with 409 Conflict; with the current one it succeeds and takes a new version."""
    _, client = kube
    core = CoreV1Api(client)
    first = await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "c"}, "data": {"v": "1"}})
    first.data = {"v": "2"}
    second = await core.replace_namespaced_config_map("c", NAMESPACE, first)
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    first.data = {"v": "3"}  # still carries the first resourceVersion
    with pytest.raises(ApiException) as stale:
        await core.replace_namespaced_config_map("c", NAMESPACE, first)
    assert stale.value.status == 409 and _status(stale.value)["reason"] == "Conflict"
    assert "the object has been modified" in _status(stale.value)["message"]
    assert (await core.read_namespaced_config_map("c", NAMESPACE)).data == {"v": "2"}


async def test_replace_keeps_uid_and_creation_and_bumps_generation_only_for_spec(kube: Kube) -> None:
    """metadata.generation ("Object Meta"): bumped by changes outside metadata and status; a label change
    keeps it. uid and creationTimestamp cannot be changed by an update (a body without the uid keeps it; one
    with another uid is a 409, test_update_carrying_another_uid_is_409_precondition_failed)."""
    _, client = kube
    custom = CustomObjectsApi(client)
    args = ("submariner.io", "v1", NAMESPACE, "endpoints")
    ep = await custom.create_namespaced_custom_object(*args, _endpoint("e1"))
    uid, created = ep["metadata"]["uid"], ep["metadata"]["creationTimestamp"]
    ep["metadata"]["labels"] = {"a": "b"}
    del ep["metadata"]["uid"]
    ep["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z"
    ep = await custom.replace_namespaced_custom_object(*args, "e1", ep)
    assert (ep["metadata"]["generation"], ep["metadata"]["uid"]) == (1, uid)
    assert ep["metadata"]["creationTimestamp"] == created
    ep["spec"]["hostname"] = "other"
    ep = await custom.replace_namespaced_custom_object(*args, "e1", ep)
    assert ep["metadata"]["generation"] == 2


async def test_update_carrying_another_uid_is_409_precondition_failed(kube: Kube) -> None:
    """A PUT or PATCH whose body carries a metadata.uid other than the stored object's is a 409 Conflict, as the
    API server's generic registry answers (an update meant for an earlier object of the same name); the same
    uid, or none, passes. Nothing is written by the refused update."""
    _, client = kube
    core = CoreV1Api(client)
    cm = await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "c"}, "data": {"v": "1"}})
    uid = cm.metadata.uid
    body = {"metadata": {"name": "c", "uid": "0000-earlier"}, "data": {"v": "2"}}
    refused = []
    with pytest.raises(ApiException) as put:
        await core.replace_namespaced_config_map("c", NAMESPACE, body)
    refused.append(put.value)
    with pytest.raises(ApiException) as merge:
        await core.patch_namespaced_config_map("c", NAMESPACE, body, _content_type=MERGE)
    refused.append(merge.value)
    for err in refused:
        assert err.status == 409 and _status(err)["reason"] == "Conflict"
        message = _status(err)["message"]
        assert message.startswith('Operation cannot be fulfilled on configmaps "c": ')
        assert f"Precondition failed: UID in precondition: 0000-earlier, UID in object meta: {uid}" in message
    current = await core.read_namespaced_config_map("c", NAMESPACE)
    assert current.data == {"v": "1"} and current.metadata.resource_version == cm.metadata.resource_version
    body["metadata"]["uid"] = uid
    assert (await core.replace_namespaced_config_map("c", NAMESPACE, body)).data == {"v": "2"}
    body["data"] = {"v": "3"}
    patched = await core.patch_namespaced_config_map("c", NAMESPACE, body, _content_type=MERGE)
    assert patched.data == {"v": "3"} and patched.metadata.uid == uid


async def test_status_update_carrying_another_uid_is_409(kube: Kube) -> None:
    """The /status subresource goes through the same check: a merge patch of a Pod's status for another uid."""
    _, client = kube
    core = CoreV1Api(client)
    pod = await core.create_namespaced_pod(NAMESPACE, {"metadata": {"name": "p"}, "spec": {"containers": []}})
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_status(
            "p", NAMESPACE, {"metadata": {"uid": "0000-earlier"}, "status": {"phase": "Running"}}, _content_type=MERGE
        )
    assert err.value.status == 409
    assert "Precondition failed: UID in precondition" in _status(err.value)["message"]
    ok = await core.patch_namespaced_pod_status(
        "p", NAMESPACE, {"metadata": {"uid": pod.metadata.uid}, "status": {"phase": "Running"}}, _content_type=MERGE
    )
    assert ok.status.phase == "Running"


async def test_unconditional_replace_allowed_for_builtin_refused_for_custom_resources(kube: Kube) -> None:
    """A PUT without metadata.resourceVersion is an unconditional update: allowed for built-in types, 422
    Invalid for custom resources (customResourceStrategy.AllowUnconditionalUpdate is false)."""
    _, client = kube
    core, custom = CoreV1Api(client), CustomObjectsApi(client)
    await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "c"}})
    replaced = await core.replace_namespaced_config_map("c", NAMESPACE, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    assert replaced.data == {"k": "v"}
    args = ("submariner.io", "v1", NAMESPACE, "endpoints")
    await custom.create_namespaced_custom_object(*args, _endpoint("e1"))
    with pytest.raises(ApiException) as err:
        await custom.replace_namespaced_custom_object(*args, "e1", _endpoint("e1"))
    assert err.value.status == 422


async def test_update_that_changes_nothing_keeps_the_resource_version(kube: Kube) -> None:
    """A no-op update is not written (the registry compares before writing to etcd): the resourceVersion
    stays and no watch event is sent."""
    emulator, client = kube
    core = CoreV1Api(client)
    cm = await core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    again = await core.replace_namespaced_config_map("c", NAMESPACE, cm)
    assert again.metadata.resource_version == cm.metadata.resource_version
    assert str(emulator.store.rv) == cm.metadata.resource_version


async def test_delete_returns_the_object_and_honours_preconditions(kube: Kube) -> None:
    """DELETE answers the deleted object; DeleteOptions.preconditions.resourceVersion that does not hold
    is a 409 Conflict and nothing is deleted."""
    _, client = kube
    leases = CoordinationV1Api(client)
    lease = await leases.create_namespaced_lease(
        NAMESPACE, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}
    )
    with pytest.raises(ApiException) as err:
        await leases.delete_namespaced_lease("l", NAMESPACE, body={"preconditions": {"resourceVersion": "1"}})
    assert err.value.status == 409 and "Precondition failed" in _status(err.value)["message"]
    raw = await leases.delete_namespaced_lease(
        "l",
        NAMESPACE,
        body={"preconditions": {"resourceVersion": lease.metadata.resource_version}},
        _preload_content=False,
    )
    gone = json.loads(await raw.read())
    assert gone["kind"] == "Lease" and gone["spec"]["holderIdentity"] == "a"
    assert int(gone["metadata"]["resourceVersion"]) > int(lease.metadata.resource_version)
    with pytest.raises(ApiException) as missing:
        await leases.read_namespaced_lease("l", NAMESPACE)
    assert missing.value.status == 404


async def test_lease_crud(kube: Kube) -> None:
    """coordination.k8s.io/v1 Leases: create, read, replace with the current version (a renewal), 409 for a
    second writer that raced on the same version, delete (the release)."""
    _, client = kube
    leases = CoordinationV1Api(client)
    body = {"metadata": {"name": "magw-gateway"}, "spec": {"holderIdentity": "gw1", "leaseDurationSeconds": 10}}
    created = await leases.create_namespaced_lease(NAMESPACE, body)
    mine = await leases.read_namespaced_lease("magw-gateway", NAMESPACE)
    theirs = await leases.read_namespaced_lease("magw-gateway", NAMESPACE)
    mine.spec.lease_transitions = 1
    renewed = await leases.replace_namespaced_lease("magw-gateway", NAMESPACE, mine)
    assert renewed.spec.holder_identity == "gw1" and renewed.spec.lease_transitions == 1
    theirs.spec.holder_identity = "gw2"
    with pytest.raises(ApiException) as err:
        await leases.replace_namespaced_lease("magw-gateway", NAMESPACE, theirs)
    assert err.value.status == 409
    listed = await leases.list_namespaced_lease(NAMESPACE)
    assert [i.spec.holder_identity for i in listed.items] == ["gw1"]
    await leases.delete_namespaced_lease("magw-gateway", NAMESPACE)
    assert (await leases.list_namespaced_lease(NAMESPACE)).items == []
    assert created.metadata.uid != ""


async def test_every_kind_of_the_spec_is_served(kube: Kube) -> None:
    """The kinds of the shared API table (submariner.io v1 and v1alpha1, multicluster.x-k8s.io) and the
    built-in ones the sources read: each can be created and listed."""
    _, client = kube
    custom = CustomObjectsApi(client)
    kinds = [
        ("submariner.io", "v1", "clusters", "Cluster"),
        ("submariner.io", "v1", "endpoints", "Endpoint"),
        ("submariner.io", "v1", "gateways", "Gateway"),
        ("submariner.io", "v1", "clusterglobalegressips", "ClusterGlobalEgressIP"),
        ("submariner.io", "v1", "globalegressips", "GlobalEgressIP"),
        ("submariner.io", "v1", "globalingressips", "GlobalIngressIP"),
        ("submariner.io", "v1alpha1", "submariners", "Submariner"),
        ("multicluster.x-k8s.io", "v1alpha1", "serviceexports", "ServiceExport"),
    ]
    for group, version, plural, kind in kinds:
        body = {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "x"}, "spec": {}}
        await custom.create_namespaced_custom_object(group, version, NAMESPACE, plural, body)
        listed = await custom.list_namespaced_custom_object(group, version, NAMESPACE, plural)
        assert [i["kind"] for i in listed["items"]] == [kind]
    core = CoreV1Api(client)
    await core.create_namespaced_pod(NAMESPACE, {"metadata": {"name": "p"}, "spec": {"containers": []}})
    await core.create_namespaced_service(NAMESPACE, {"metadata": {"name": "s"}, "spec": {}})
    assert [p.metadata.name for p in (await core.list_pod_for_all_namespaces()).items] == ["p"]
    assert [s.metadata.name for s in (await core.list_namespaced_service(NAMESPACE)).items] == ["s"]


async def test_unknown_resource_is_404_and_wrong_method_405(kube: Kube) -> None:
    """Paths the server does not serve answer 404 with a Status; POST to an all-namespaces collection 405."""
    _, client = kube
    custom = CustomObjectsApi(client)
    with pytest.raises(ApiException) as err:
        await custom.list_namespaced_custom_object("example.com", "v1", NAMESPACE, "widgets")
    assert err.value.status == 404 and _status(err.value)["kind"] == "Status"
    with pytest.raises(ApiException) as post:
        await client.call_api("/api/v1/pods", "POST", body={"metadata": {"name": "p"}}, response_types_map={})
    assert post.value.status == 405
