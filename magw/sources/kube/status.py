"""Status writers: the ``Gateway`` status built from a route agent's health view, written through the status
subresource as JSON merge patches (RFC 7386), and only when it changed.

Why merge patches, and why the content type is spelled out: kubernetes_asyncio 36 picks the Content-Type of
``patch_*_status`` from the body; for a dict it falls through to the first type the operation declares,
``application/json-patch+json``, and a JSON patch must be a list of operations, so the API server rejects
the body (or, with a list, the patch replaces paths wholesale). A merge patch of ``{"status": {...}}`` sets
the keys given, deletes those given as null, and leaves spec and every other status key alone, which is
what two writers of one object need. So every write here passes ``_content_type=MERGE_PATCH``.

No write per probe: ``GatewayStatusWriter`` keeps the status the server last returned and patches only the
difference; an unchanged status costs nothing. Conditions are merged onto the server's (other types stay,
an unchanged status keeps its lastTransitionTime), so a recomputed Ready with a fresh timestamp is no
change either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

import structlog
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from magw.model import Endpoint
from magw.sources.kube.conditions import KubeCondition, merge_conditions, set_condition
from magw.sources.kube.lease import BACKOFF_CAP, BACKOFF_FIRST
from magw.sources.kube.reflector import API_ERRORS
from magw.util.aio import wait_first

log = structlog.get_logger(__name__)

MERGE_PATCH = "application/merge-patch+json"
GROUP, VERSION, GATEWAYS = "submariner.io", "v1", "gateways"

HaStatus = Literal["active", "passive"]
# health.view.status_document's peer states -> the Gateway CRD's connection status
_CONNECTION = {"up": "connected", "pending": "connecting", "unknown": "connecting", "down": "error"}
_MESSAGE = {
    "up": "health probes answered",
    "pending": "probes answered again; waiting for enough answers in a row",
    "unknown": "no probe answered yet",
    "down": "health probes not answered",
}
RTT_FIELDS = ("last", "min", "average", "max", "stdDev")


def duration_string(seconds: float) -> str:
    """An RTT as the CRD's duration string: milliseconds with three decimals ("1.234ms")."""
    return f"{seconds * 1000:.3f}ms"


def endpoint_ref(endpoint: Endpoint) -> dict[str, Any]:
    """The CRD's endpoint summary {cluster_id, hostname, private_ip, public_ip}; public_ip null when unset
    (null deletes it in a merge patch, so a withdrawn public IP does not linger)."""
    return {
        "cluster_id": endpoint.cluster,
        "hostname": endpoint.hostname,
        "private_ip": str(endpoint.private_ip),
        "public_ip": None if endpoint.public_ip is None else str(endpoint.public_ip),
    }


def _connection(endpoint: Endpoint, peer: Mapping[str, Any] | None) -> dict[str, Any]:
    state = "unknown" if peer is None else str(peer.get("state", "unknown"))
    conn: dict[str, Any] = {
        "endpoint": endpoint_ref(endpoint),
        "status": _CONNECTION.get(state, "error"),
        "statusMessage": "not probed" if peer is None else _MESSAGE.get(state, f"health state {state}"),
    }
    rtt = peer.get("rtt") if peer is not None else None
    if isinstance(rtt, Mapping) and all(isinstance(rtt.get(k), int | float) for k in RTT_FIELDS):
        conn["latencyRTT"] = {k: duration_string(float(rtt[k])) for k in RTT_FIELDS}
    return conn


def _ready(ha_status: HaStatus, failure: str, conns: list[dict[str, Any]], generation: int | None) -> KubeCondition:
    def cond(status: Literal["True", "False"], reason: str, message: str) -> KubeCondition:
        return KubeCondition(
            type="Ready", status=status, reason=reason, message=message, observed_generation=generation
        )

    if failure:
        return cond("False", "Failure", failure)
    if ha_status == "passive":
        return cond("True", "Passive", "standby: ready to take over")
    failing = [c["endpoint"]["hostname"] for c in conns if c["status"] == "error"]
    if failing:
        return cond("False", "ConnectionError", "not answering: " + ", ".join(failing))
    waiting = [c["endpoint"]["hostname"] for c in conns if c["status"] == "connecting"]
    if waiting:
        return cond("False", "Connecting", "waiting for: " + ", ".join(waiting))
    return cond("True", "Connected", f"{len(conns)} remote gateway(s) connected")


def gateway_status(
    *,
    local: Endpoint,
    ha_status: HaStatus,
    remotes: Iterable[Endpoint],
    health: Mapping[str, Any] | None,
    status_failure: str = "",
    generation: int | None = None,
    conditions: Iterable[Mapping[str, Any]] = (),
    now: datetime | None = None,
) -> dict[str, Any]:
    """The ``Gateway`` status of /tmp/k8s-spec.md. Pure.

    ``remotes``: the published gateways of the other clusters (one connection each, sorted by cluster and
    hostname); ``health``: the route agent's ``status_json()["health"]`` (``magw.health.view``), whose
    ``peers`` give each connection's state (up: connected, pending/unknown: connecting, down: error) and,
    when a peer carries ``rtt`` {last, min, average, max, stdDev} in seconds, its ``latencyRTT``. A passive
    gateway carries no traffic and lists no connections. ``conditions``: the current ones, to keep
    lastTransitionTime of an unchanged Ready.
    """
    peers = {(str(p.get("cluster")), str(p.get("hostname"))): p for p in (health or {}).get("peers", ()) or ()}
    conns: list[dict[str, Any]] = []
    if ha_status == "active":
        for ep in sorted(remotes, key=lambda e: (e.cluster, e.hostname)):
            if ep.cluster != local.cluster:
                conns.append(_connection(ep, peers.get((ep.cluster, ep.hostname))))
    ready = _ready(ha_status, status_failure, conns, generation)
    return {
        "haStatus": ha_status,
        "localEndpoint": endpoint_ref(local),
        "statusFailure": status_failure,
        "connections": conns,
        "conditions": set_condition(conditions, ready, now),
    }


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The smallest RFC 7386 patch that turns ``old`` into ``old`` updated by ``new``: keys of ``new`` that
    differ (objects recursively, lists whole), None for a key of ``new`` that is None and present in ``old``.
    Keys only in ``old`` are not touched (other writers' fields). Empty: nothing to write."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        if value is None:
            if old.get(key) is not None:
                patch[key] = None
            continue
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            sub = merge_patch(before, value)
            if sub:
                patch[key] = sub
        else:
            clean = _drop_nulls(value)  # as the server stores it: a null inside a list or new object is absent
            if before != clean:
                patch[key] = clean
    return patch


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


async def patch_status(
    api: Any, group: str, version: str, namespace: str, plural: str, name: str, status: Mapping[str, Any]
) -> dict[str, Any]:
    """Merge-patch ``status`` into the status subresource of a namespaced custom object; the object back.

    Keys absent from ``status`` are left alone, a None deletes its key; spec is never touched (the
    status subresource ignores it)."""
    custom: Any = CustomObjectsApi(api)  # Any: the package's stub omits _content_type, which the code takes
    result: dict[str, Any] = await custom.patch_namespaced_custom_object_status(
        group, version, namespace, plural, name, {"status": dict(status)}, _content_type=MERGE_PATCH
    )
    return result


class GatewayStatusWriter:
    """Keeps one ``Gateway`` (named after the node) in existence and its status up to date.

    ``submit(status)`` hands over the latest status (cheap; call it on every health change or tick);
    ``run(stop)`` writes it when it differs from what the server holds, coalescing submissions made while
    a write is under way, and retries API errors with capped backoff (0.2 s doubling to 5 s). Every
    ``resync`` seconds it reads the object again and rewrites what someone else changed or deleted (the
    object included): level-driven, not trusting its cache forever.

    ``conditions`` is a list, and a merge patch replaces lists whole: a condition another writer adds
    between our read and our patch is lost until that writer's next write. One writer per Gateway (the
    node's gateway daemon) is the design."""

    def __init__(
        self,
        api: Any,
        namespace: str,
        name: str,
        *,
        group: str = GROUP,
        version: str = VERSION,
        resync: float = 300.0,
    ) -> None:
        self.namespace, self.name, self.group, self.version = namespace, name, group, version
        self.resync = resync
        self._last: dict[str, Any] | None = None  # the last status written or found in place
        self._api = api
        self._custom = CustomObjectsApi(api)
        self._server: dict[str, Any] | None = None  # the status the server last returned; None: not read
        self.generation: int | None = None
        self._pending: dict[str, Any] | None = None
        self._wake = asyncio.Event()
        self.writes = 0  # patches sent (for tests and metrics)

    async def ensure(self) -> None:
        """Read the Gateway, creating it with an empty spec when absent (409: someone just did, read again)."""
        try:
            obj = await self._custom.get_namespaced_custom_object(
                self.group, self.version, self.namespace, GATEWAYS, self.name
            )
        except ApiException as e:
            if e.status != 404:
                raise
            body = {
                "apiVersion": f"{self.group}/{self.version}",
                "kind": "Gateway",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {},
            }
            try:
                obj = await self._custom.create_namespaced_custom_object(
                    self.group, self.version, self.namespace, GATEWAYS, body
                )
            except ApiException as e2:
                if e2.status != 409:
                    raise
                obj = await self._custom.get_namespaced_custom_object(
                    self.group, self.version, self.namespace, GATEWAYS, self.name
                )
        self._remember(obj)

    def _remember(self, obj: Mapping[str, Any]) -> None:
        self._server = dict(obj.get("status") or {})
        self.generation = (obj.get("metadata") or {}).get("generation")

    async def update(self, status: Mapping[str, Any]) -> bool:
        """Write ``status`` if it differs from the server's; True when a patch was sent. API errors raise."""
        if self._server is None:
            await self.ensure()
        server = self._server or {}
        wanted = dict(status)
        if "conditions" in wanted:
            stamped = [self._stamp(c) for c in wanted["conditions"]]
            wanted["conditions"] = merge_conditions(server.get("conditions") or (), stamped)
        patch = merge_patch(server, wanted)
        if not patch:
            self._last = dict(status)
            return False
        try:
            obj = await patch_status(self._api, self.group, self.version, self.namespace, GATEWAYS, self.name, patch)
        except ApiException as e:
            if e.status == 404:
                self._server = None  # deleted under us: create it again on the next try
            raise
        self.writes += 1
        self._remember(obj)
        self._last = dict(status)
        return True

    def _stamp(self, cond: Mapping[str, Any]) -> Mapping[str, Any]:
        if cond.get("observedGeneration") is None and self.generation is not None:
            return {**cond, "observedGeneration": self.generation}
        return cond

    def submit(self, status: Mapping[str, Any]) -> None:
        """Hand over the latest status; ``run`` writes it (a later submit replaces an unwritten one)."""
        self._pending = dict(status)
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Write submitted statuses until ``stop`` is set; errors are logged and retried, never raised."""
        backoff = BACKOFF_FIRST
        while not stop.is_set():
            if self._pending is None:
                if not await wait_first(stop, self._wake, timeout=self.resync) and self._last is not None:
                    self._server, self._pending = None, self._last  # resync: read again, write if it differs
                self._wake.clear()
                continue
            status = self._pending
            try:
                await self.update(status)
            except API_ERRORS as e:
                log.warning("gateway_status.write_failed", gateway=self.name, error=repr(e), retry_in=backoff)
                await wait_first(stop, None, timeout=backoff)
                backoff = min(backoff * 2, BACKOFF_CAP)
                continue
            backoff = BACKOFF_FIRST
            if self._pending is status:
                self._pending = None
