"""Conditions per the API conventions, the Gateway status built from a health view, and merge-patch status
writes through the status subresource (real kubernetes_asyncio against the API server emulator)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from magw.model import Endpoint
from magw.sources.kube.conditions import KubeCondition, find_condition, merge_conditions, set_condition
from magw.sources.kube.status import (
    GATEWAYS,
    GROUP,
    MERGE_PATCH,
    VERSION,
    GatewayStatusWriter,
    duration_string,
    gateway_status,
    merge_patch,
    patch_status,
)
from tests.support import kubeemu_fixtures

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def ready(status: Any, reason: str = "Connected", message: str = "", generation: int | None = None) -> KubeCondition:
    return KubeCondition(type="Ready", status=status, reason=reason, message=message, observed_generation=generation)


# --- conditions -------------------------------------------------------------------------------------------


def test_condition_keeps_transition_time_while_status_holds() -> None:
    first = set_condition([], ready("True", "Connected", "2 connected", 1), now=T0)
    again = set_condition(first, ready("True", "AllGood", "3 connected", 2), now=T1)
    assert again == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "AllGood",
            "message": "3 connected",
            "lastTransitionTime": "2025-01-02T03:04:05Z",
            "observedGeneration": 2,
        }
    ]


def test_condition_status_change_restamps_and_keeps_other_types_in_place() -> None:
    other = {"type": "Synced", "status": "True", "reason": "Ok", "message": "", "lastTransitionTime": "x"}
    existing = [*set_condition([], ready("True"), now=T0), other]
    out = set_condition(existing, ready("False", "ConnectionError"), now=T1)
    assert [c["type"] for c in out] == ["Ready", "Synced"]
    assert out[0]["lastTransitionTime"] == "2025-01-02T03:09:05Z"
    assert out[0]["status"] == "False"
    assert out[1] == other
    assert existing[0]["status"] == "True"  # the input is not modified


def test_condition_one_entry_per_type() -> None:
    dup = [
        {"type": "Ready", "status": "True", "reason": "A", "message": "", "lastTransitionTime": "t1"},
        {"type": "Ready", "status": "False", "reason": "B", "message": "", "lastTransitionTime": "t2"},
    ]
    out = set_condition(dup, ready("True", "C"), now=T1)
    assert len(out) == 1
    assert out[0]["reason"] == "C"
    assert out[0]["lastTransitionTime"] == "t1"


@pytest.mark.parametrize(
    ("field", "value"),
    [("reason", "not camel"), ("reason", ""), ("type", "bad type!"), ("status", "true")],
)
def test_condition_rejects_what_the_api_server_would(field: str, value: str) -> None:
    args: dict[str, Any] = {"type": "Ready", "status": "True", "reason": "Ok"}
    args[field] = value
    with pytest.raises(ValueError, match=field if field != "status" else "'status'"):
        KubeCondition(**args)


def test_merge_conditions_keeps_the_servers_time_unless_the_status_changed() -> None:
    server = set_condition([], ready("True"), now=T0)
    computed = set_condition([], ready("True", "Connected", "recomputed"), now=T1)
    merged = merge_conditions(server, computed, now=T1)
    assert merged[0]["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    assert merged[0]["message"] == "recomputed"
    changed = merge_conditions(server, set_condition([], ready("False", "Down"), now=T1))
    assert changed[0]["lastTransitionTime"] == "2025-01-02T03:09:05Z"  # when it was computed
    assert find_condition(merged, "Ready") is not None
    assert find_condition(merged, "Other") is None


# --- the Gateway status, pure -------------------------------------------------------------------------------

LOCAL = Endpoint(cluster="east", hostname="e-gw1", private_ip=IPv4Address("10.1.0.5"))
W1 = Endpoint(cluster="west", hostname="w-gw1", private_ip=IPv4Address("10.2.0.5"), public_ip=IPv4Address("1.2.3.4"))
W2 = Endpoint(cluster="west", hostname="w-gw2", private_ip=IPv4Address("10.2.0.6"))
N1 = Endpoint(cluster="north", hostname="n-gw1", private_ip=IPv4Address("10.3.0.5"))
E2 = Endpoint(cluster="east", hostname="e-gw2", private_ip=IPv4Address("10.1.0.6"))
RTT = {"last": 0.001234, "min": 0.0009, "average": 0.0011, "max": 0.002, "stdDev": 0.0002}


def health(**states: str) -> dict[str, Any]:
    """A route agent's status_json()["health"] (magw.health.view.status_document), with one peer carrying RTT."""
    clusters = {"w-gw1": "west", "w-gw2": "west", "n-gw1": "north", "e-gw2": "east"}
    peers = []
    for host, state in states.items():
        peer: dict[str, Any] = {"hostname": host, "cluster": clusters[host], "address": "241.0.0.1", "state": state}
        if host == "w-gw1":
            peer["rtt"] = RTT
        peers.append(peer)
    return {"mode": "gateway", "peers": peers, "down": [], "leases": [1]}


def test_gateway_status_maps_each_remote_gateway_to_a_connection() -> None:
    status = gateway_status(
        local=LOCAL,
        ha_status="active",
        remotes=[W2, N1, W1, E2],
        health=health(**{"w-gw1": "up", "w-gw2": "down", "e-gw2": "up"}),
        generation=3,
        now=T0,
    )
    assert status["haStatus"] == "active"
    assert status["localEndpoint"] == {
        "cluster_id": "east",
        "hostname": "e-gw1",
        "private_ip": "10.1.0.5",
        "public_ip": None,
    }
    conns = {c["endpoint"]["hostname"]: c for c in status["connections"]}
    assert [c["endpoint"]["hostname"] for c in status["connections"]] == ["n-gw1", "w-gw1", "w-gw2"]  # no local
    assert conns["w-gw1"]["status"] == "connected"
    assert conns["w-gw1"]["endpoint"]["public_ip"] == "1.2.3.4"
    assert conns["w-gw1"]["latencyRTT"] == {
        "last": "1.234ms",
        "min": "0.900ms",
        "average": "1.100ms",
        "max": "2.000ms",
        "stdDev": "0.200ms",
    }
    assert conns["w-gw2"]["status"] == "error"
    assert "latencyRTT" not in conns["w-gw2"]
    assert conns["n-gw1"]["status"] == "connecting"  # not probed yet
    assert conns["n-gw1"]["statusMessage"] == "not probed"
    (cond,) = status["conditions"]
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("False", "ConnectionError", 3)
    assert "w-gw2" in cond["message"]


def test_gateway_status_ready_when_every_connection_answers() -> None:
    status = gateway_status(
        local=LOCAL, ha_status="active", remotes=[W1, W2], health=health(**{"w-gw1": "up", "w-gw2": "up"}), now=T0
    )
    assert {c["status"] for c in status["connections"]} == {"connected"}
    assert status["conditions"][0]["status"] == "True"
    pending = gateway_status(
        local=LOCAL, ha_status="active", remotes=[W1, W2], health=health(**{"w-gw1": "up", "w-gw2": "pending"}), now=T0
    )
    assert pending["conditions"][0]["reason"] == "Connecting"


def test_gateway_status_passive_lists_no_connections_and_failure_wins() -> None:
    passive = gateway_status(local=LOCAL, ha_status="passive", remotes=[W1], health=None, now=T0)
    assert passive["connections"] == []
    assert passive["conditions"][0]["status"] == "True"
    failed = gateway_status(
        local=LOCAL, ha_status="active", remotes=[W1], health=health(**{"w-gw1": "up"}), status_failure="no tunnel"
    )
    assert failed["statusFailure"] == "no tunnel"
    assert (failed["conditions"][0]["status"], failed["conditions"][0]["reason"]) == ("False", "Failure")


def test_gateway_status_keeps_ready_transition_time_from_the_previous_conditions() -> None:
    h = health(**{"w-gw1": "up"})
    first = gateway_status(local=LOCAL, ha_status="active", remotes=[W1], health=h, now=T0)
    later = gateway_status(
        local=LOCAL, ha_status="active", remotes=[W1], health=h, conditions=first["conditions"], now=T1
    )
    assert later["conditions"] == first["conditions"]


def test_duration_string() -> None:
    assert duration_string(0.001234) == "1.234ms"
    assert duration_string(1.5) == "1500.000ms"


# --- merge_patch, pure ----------------------------------------------------------------------------------------


def test_merge_patch_is_empty_when_nothing_changed_and_minimal_otherwise() -> None:
    old = {"haStatus": "active", "localEndpoint": {"hostname": "a", "private_ip": "10.0.0.1"}, "other": 1}
    new = {"haStatus": "active", "localEndpoint": {"hostname": "a", "private_ip": "10.0.0.1", "public_ip": None}}
    assert merge_patch(old, new) == {}
    moved = {"haStatus": "passive", "localEndpoint": {"hostname": "a", "private_ip": "10.0.0.2", "public_ip": None}}
    assert merge_patch(old, moved) == {"haStatus": "passive", "localEndpoint": {"private_ip": "10.0.0.2"}}


def test_merge_patch_deletes_with_null_and_compares_lists_as_stored() -> None:
    old = {"localEndpoint": {"public_ip": "1.2.3.4"}, "connections": [{"endpoint": {"hostname": "w"}}]}
    new = {"localEndpoint": {"public_ip": None}, "connections": [{"endpoint": {"hostname": "w", "public_ip": None}}]}
    assert merge_patch(old, new) == {"localEndpoint": {"public_ip": None}}


# --- against the emulator, with the real client ---------------------------------------------------------------

kube, kube_env = kubeemu_fixtures.kube, kubeemu_fixtures.kube_env
NS = kubeemu_fixtures.NAMESPACE


async def get_gateway(client: ApiClient, name: str = "e-gw1") -> dict[str, Any]:
    obj: dict[str, Any] = await CustomObjectsApi(client).get_namespaced_custom_object(
        GROUP, VERSION, NS, GATEWAYS, name
    )
    return obj


async def create_gateway(client: ApiClient, spec: dict[str, Any]) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gateway", "metadata": {"name": "e-gw1"}, "spec": spec}
    await CustomObjectsApi(client).create_namespaced_custom_object(GROUP, VERSION, NS, GATEWAYS, body)


async def test_merge_patch_leaves_spec_and_other_status_keys_alone(kube: Any) -> None:
    _, client = kube
    await create_gateway(client, {"marker": "kept"})
    await patch_status(client, GROUP, VERSION, NS, GATEWAYS, "e-gw1", {"haStatus": "active", "statusFailure": ""})
    obj = await patch_status(client, GROUP, VERSION, NS, GATEWAYS, "e-gw1", {"connections": [], "spec": "ignored"})
    assert obj["status"] == {"haStatus": "active", "statusFailure": "", "connections": [], "spec": "ignored"}
    stored = await get_gateway(client)
    assert stored["spec"] == {"marker": "kept"}
    assert stored["status"] == obj["status"]
    obj = await patch_status(client, GROUP, VERSION, NS, GATEWAYS, "e-gw1", {"statusFailure": None})
    assert "statusFailure" not in obj["status"]  # null deletes, per RFC 7386
    assert obj["status"]["haStatus"] == "active"


async def test_a_dict_body_without_the_merge_content_type_is_sent_as_a_json_patch(kube: Any) -> None:
    """kubernetes_asyncio 36 picks application/json-patch+json for a dict body; the server rejects it as a JSON
    patch (which must be a list of operations), and the status stays as it was."""
    _, client = kube
    await create_gateway(client, {})
    await patch_status(client, GROUP, VERSION, NS, GATEWAYS, "e-gw1", {"haStatus": "passive"})
    api = CustomObjectsApi(client)
    assert (
        client.select_header_content_type(
            ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"],
            "PATCH",
            {"status": {}},
        )
        == "application/json-patch+json"
    )
    with pytest.raises(ApiException) as err:
        await api.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, GATEWAYS, "e-gw1", {"status": {"haStatus": "active"}}
        )
    assert err.value.status == 400
    assert "jsonpatch" in err.value.body  # read as a JSON patch, as the API server would
    assert (await get_gateway(client))["status"] == {"haStatus": "passive"}
    # the same body with our content type is a merge patch
    await api.patch_namespaced_custom_object_status(
        GROUP, VERSION, NS, GATEWAYS, "e-gw1", {"status": {"haStatus": "active"}}, _content_type=MERGE_PATCH
    )
    assert (await get_gateway(client))["status"] == {"haStatus": "active"}


def status_at(now: datetime, **states: str) -> dict[str, Any]:
    return gateway_status(local=LOCAL, ha_status="active", remotes=[W1, W2], health=health(**states), now=now)


async def test_writer_creates_the_gateway_and_writes_only_changes(kube: Any) -> None:
    emulator, client = kube
    writer = GatewayStatusWriter(client, NS, "e-gw1")
    assert await writer.update(status_at(T0, **{"w-gw1": "up", "w-gw2": "up"})) is True
    obj = await get_gateway(client)
    assert obj["spec"] == {}
    assert [c["status"] for c in obj["status"]["connections"]] == ["connected", "connected"]
    assert "public_ip" not in obj["status"]["localEndpoint"]  # sent as null: absent
    ready = obj["status"]["conditions"][0]
    assert (ready["status"], ready["observedGeneration"]) == ("True", obj["metadata"]["generation"])
    rv = obj["metadata"]["resourceVersion"]
    patches = sum(1 for m, _ in emulator.faults.log if m == "PATCH")
    # a probe tick later: the same state recomputed with a new time is no change, so no request at all
    assert await writer.update(status_at(T1, **{"w-gw1": "up", "w-gw2": "up"})) is False
    assert sum(1 for m, _ in emulator.faults.log if m == "PATCH") == patches
    assert (await get_gateway(client))["metadata"]["resourceVersion"] == rv
    # a peer goes down: one patch; Ready turns False with a new transition time
    assert await writer.update(status_at(T1, **{"w-gw1": "up", "w-gw2": "down"})) is True
    obj = await get_gateway(client)
    assert [c["status"] for c in obj["status"]["connections"]] == ["connected", "error"]
    ready = obj["status"]["conditions"][0]
    assert (ready["status"], ready["lastTransitionTime"]) == ("False", "2025-01-02T03:09:05Z")
    assert writer.writes == 2


async def test_writer_keeps_other_writers_conditions_and_transition_times(kube: Any) -> None:
    _, client = kube
    await create_gateway(client, {})
    other = {
        "type": "Synced",
        "status": "True",
        "reason": "Ok",
        "message": "",
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }
    await patch_status(client, GROUP, VERSION, NS, GATEWAYS, "e-gw1", {"conditions": [other], "extra": 1})
    writer = GatewayStatusWriter(client, NS, "e-gw1")
    await writer.update(status_at(T0, **{"w-gw1": "up", "w-gw2": "up"}))
    first = (await get_gateway(client))["status"]
    assert first["extra"] == 1
    assert [c["type"] for c in first["conditions"]] == ["Synced", "Ready"]
    assert first["conditions"][0] == other
    # a new writer (a restarted gateway) recomputes Ready later: the transition time stays
    again = GatewayStatusWriter(client, NS, "e-gw1")
    assert await again.update(status_at(T1, **{"w-gw1": "up", "w-gw2": "pending"})) is True
    second = (await get_gateway(client))["status"]
    assert second["conditions"][1]["reason"] == "Connecting"
    assert second["conditions"][1]["lastTransitionTime"] == "2025-01-02T03:09:05Z"  # True -> False
    assert await again.update(status_at(T0, **{"w-gw1": "up", "w-gw2": "pending"})) is False


async def test_writer_run_coalesces_and_retries_until_the_server_answers(kube: Any) -> None:
    emulator, client = kube
    writer = GatewayStatusWriter(client, NS, "e-gw1")
    stop = asyncio.Event()
    emulator.faults.fail(3, 503)
    task = asyncio.create_task(writer.run(stop))
    writer.submit(status_at(T0, **{"w-gw1": "up", "w-gw2": "up"}))
    writer.submit(status_at(T0, **{"w-gw1": "down", "w-gw2": "up"}))  # replaces the unwritten one
    for _ in range(300):
        if writer.writes:
            break
        await asyncio.sleep(0.01)
    assert writer.writes == 1
    obj = await get_gateway(client)
    assert [c["status"] for c in obj["status"]["connections"]] == ["error", "connected"]
    stop.set()
    await asyncio.wait_for(task, 2)


async def test_writer_resync_restores_what_someone_else_deleted(kube: Any) -> None:
    _, client = kube
    writer = GatewayStatusWriter(client, NS, "e-gw1", resync=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(writer.run(stop))
    writer.submit(status_at(T0, **{"w-gw1": "up", "w-gw2": "up"}))
    for _ in range(200):
        if writer.writes:
            break
        await asyncio.sleep(0.01)
    await CustomObjectsApi(client).delete_namespaced_custom_object(GROUP, VERSION, NS, GATEWAYS, "e-gw1")
    for _ in range(200):
        if writer.writes == 2:
            break
        await asyncio.sleep(0.01)
    obj = await get_gateway(client)
    assert obj["status"]["haStatus"] == "active"
    assert [c["status"] for c in obj["status"]["connections"]] == ["connected", "connected"]
    await asyncio.sleep(0.5)  # resyncs of an unchanged object write nothing
    assert writer.writes == 2
    stop.set()
    await asyncio.wait_for(task, 2)
