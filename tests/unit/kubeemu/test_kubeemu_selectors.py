"""Label and field selectors on the emulator's lists and watches, through kubernetes-asyncio.

Pinned to "Labels and Selectors" (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/
#label-selectors), "Field Selectors" (.../field-selectors/) and, for watches, "Efficient detection of
changes" in API Concepts (a watch with a selector sees an object enter as ADDED and leave as DELETED).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiException, CoreV1Api

from magw.kubeemu import Emulator
from magw.kubeemu.errors import ApiError
from magw.kubeemu.selectors import field_selector, label_selector
from tests.support import kubeemu_fixtures
from tests.support.kubeemu_fixtures import NAMESPACE

kube, kube_env = kubeemu_fixtures.kube, kubeemu_fixtures.kube_env  # the fixtures, by name

Kube = tuple[Emulator, Any]


def _obj(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "x", "labels": labels}}


def test_label_selector_grammar() -> None:
    """Equality-based (=, ==, !=) and set-based (in, notin, exists, !exists) requirements, ANDed by commas;
    != and notin also match objects without the label."""
    gw = _obj({"submariner.io/gateway": "true", "zone": "a"})
    worker = _obj({"zone": "b"})
    bare = _obj({})
    cases = {
        "": (True, True, True),
        "submariner.io/gateway=true": (True, False, False),
        "submariner.io/gateway==true": (True, False, False),
        "submariner.io/gateway!=true": (False, True, True),
        "zone in (a, c)": (True, False, False),
        "zone notin (a,c)": (False, True, True),
        "submariner.io/gateway": (True, False, False),
        "!submariner.io/gateway": (False, True, True),
        "zone,!submariner.io/gateway": (False, True, False),
        "zone in (a,b),submariner.io/gateway!=true": (False, True, False),
    }
    for selector, expected in cases.items():
        match = label_selector(selector)
        assert (match(gw), match(worker), match(bare)) == expected, selector
    for bad in ("zone in a", "=x", "zone in (a", "a b"):
        with pytest.raises(ApiError) as err:
            label_selector(bad)
        assert err.value.code == 400


def test_field_selector_fields_and_unsupported_field() -> None:
    """Field selectors: metadata.name/metadata.namespace everywhere, the type's own fields (a Pod's
    spec.nodeName), = == !=; an unsupported field is a 400 "field label not supported"."""
    pod = {"metadata": {"name": "p", "namespace": "n"}, "spec": {"nodeName": "w1", "hostNetwork": True}}
    assert field_selector("metadata.name=p,metadata.namespace==n", ())(pod)
    assert not field_selector("metadata.name!=p", ())(pod)
    assert field_selector("spec.nodeName=w1,spec.hostNetwork=true", ("spec.nodeName", "spec.hostNetwork"))(pod)
    with pytest.raises(ApiError) as err:
        field_selector("spec.nodeName=w1", ())
    assert err.value.code == 400 and "field label not supported" in err.value.message


async def test_list_with_label_and_field_selectors(kube: Kube) -> None:
    """A list returns only matching objects; its resourceVersion is still the store's."""
    _, client = kube
    core = CoreV1Api(client)
    for name, labels in (
        ("gw1", {"submariner.io/gateway": "true"}),
        ("gw2", {"submariner.io/gateway": "true"}),
        ("w1", {}),
    ):
        await core.create_node({"metadata": {"name": name, "labels": labels}})
    gws = await core.list_node(label_selector="submariner.io/gateway=true")
    assert [n.metadata.name for n in gws.items] == ["gw1", "gw2"]
    others = await core.list_node(label_selector="!submariner.io/gateway")
    assert [n.metadata.name for n in others.items] == ["w1"]
    one = await core.list_node(field_selector="metadata.name=gw2")
    assert [n.metadata.name for n in one.items] == ["gw2"]
    assert gws.metadata.resource_version == one.metadata.resource_version
    await core.create_namespaced_pod(
        NAMESPACE, {"metadata": {"name": "p1"}, "spec": {"nodeName": "w1", "containers": []}}
    )
    await core.create_namespaced_pod(
        NAMESPACE, {"metadata": {"name": "p2"}, "spec": {"nodeName": "gw1", "containers": []}}
    )
    on_w1 = await core.list_pod_for_all_namespaces(field_selector="spec.nodeName=w1")
    assert [p.metadata.name for p in on_w1.items] == ["p1"]
    with pytest.raises(ApiException) as err:
        await core.list_node(label_selector="zone in a")
    assert err.value.status == 400 and json.loads(err.value.body)["kind"] == "Status"


async def test_watch_with_label_selector_sees_objects_enter_as_added_and_leave_as_deleted(kube: Kube) -> None:
    """A watch filtered by a selector: labelling a node gateway is ADDED for the gateway watch, removing the
    label is DELETED (carrying the change's resourceVersion), changes of other nodes are not sent."""
    _, client = kube
    core = CoreV1Api(client)
    await core.create_node({"metadata": {"name": "n1"}})
    listed = await core.list_node(label_selector="submariner.io/gateway=true")
    await core.patch_node("n1", {"metadata": {"labels": {"submariner.io/gateway": "true"}}})
    await core.patch_node("n1", {"metadata": {"annotations": {"a": "1"}}})
    await core.create_node({"metadata": {"name": "n2"}})
    unlabel = await core.patch_node("n1", {"metadata": {"labels": {"submariner.io/gateway": None}}})
    stream = watch.Watch().stream(
        core.list_node,
        label_selector="submariner.io/gateway=true",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    events = []
    async with asyncio.timeout(5):
        async for ev in stream:
            events.append((ev["type"], ev["object"].metadata.name, ev["object"].metadata.resource_version))
            if len(events) == 3:
                stream.stop()
    await stream.close()
    assert [(t, n) for t, n, _ in events] == [("ADDED", "n1"), ("MODIFIED", "n1"), ("DELETED", "n1")]
    assert events[-1][2] == unlabel.metadata.resource_version
