"""A small synchronous client for the lab's API server emulators, over their unix sockets.

The lab's own code (``up`` loading the clusters' objects, the readiness wait, ``magw lab status``, the demos)
talks to the emulators as any client does: plain HTTP requests on the Kubernetes paths, JSON bodies, the
status subresource for status. It is synchronous on purpose: those callers are plain blocking code with
bounded polls, and an event loop per poll (kubernetes-asyncio) would cost more than the poll itself. The
daemons use the real client (``magw.sources.kube.client``); this one only serves the lab.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Mapping
from typing import Any

from magw.lab.errors import LabError

TIMEOUT = 5.0

# kind -> (plural, namespaced) of every kind the lab writes or reads.
PLURALS: dict[str, tuple[str, bool]] = {
    "Node": ("nodes", False),
    "Namespace": ("namespaces", False),
    "Pod": ("pods", True),
    "Service": ("services", True),
    "ConfigMap": ("configmaps", True),
    "EndpointSlice": ("endpointslices", True),
    "Lease": ("leases", True),
    "Cluster": ("clusters", True),
    "Endpoint": ("endpoints", True),
    "Gateway": ("gateways", True),
    "ClusterGlobalEgressIP": ("clusterglobalegressips", True),
    "GlobalEgressIP": ("globalegressips", True),
    "GlobalIngressIP": ("globalingressips", True),
    "Submariner": ("submariners", True),
    "ServiceExport": ("serviceexports", True),
    "EgressConfig": ("egressconfigs", True),
    "EgressVIP": ("egressvips", True),
}
API_VERSIONS: dict[str, str] = {
    "EndpointSlice": "discovery.k8s.io/v1",
    "Lease": "coordination.k8s.io/v1",
    **dict.fromkeys(("Submariner", "EgressConfig", "EgressVIP"), "submariner.io/v1alpha1"),
    "ServiceExport": "multicluster.x-k8s.io/v1alpha1",
    **dict.fromkeys(("Cluster", "Endpoint", "Gateway", "ClusterGlobalEgressIP", "GlobalEgressIP", "GlobalIngressIP"),
                    "submariner.io/v1"),
}  # fmt: skip


class KubeHttpError(LabError):
    """A request that failed: no server, or an answer other than 2xx (one line)."""


def api_version(kind: str) -> str:
    return API_VERSIONS.get(kind, "v1")


def collection_path(kind: str, namespace: str | None = None) -> str:
    """``/api/v1/nodes``, ``/apis/submariner.io/v1/namespaces/NS/endpoints``; a namespaced kind without
    ``namespace``: across all namespaces."""
    plural, namespaced = PLURALS[kind]
    version = api_version(kind)
    base = "/api/v1" if version == "v1" else f"/apis/{version}"
    if namespaced and namespace:
        return f"{base}/namespaces/{namespace}/{plural}"
    return f"{base}/{plural}"


def object_path(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{collection_path(obj['kind'], meta.get('namespace'))}/{meta['name']}"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class KubeHttp:
    """Requests to one emulator listening on the unix socket ``socket_path``; one connection per request."""

    def __init__(self, socket_path: str, *, timeout: float = TIMEOUT) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def request(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, *, content_type: str = "application/json"
    ) -> dict[str, Any]:
        conn = _UnixConnection(self.socket_path, self.timeout)
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except OSError as exc:
            raise KubeHttpError(f"{self.socket_path}: {method} {path}: {exc}") from None
        finally:
            conn.close()
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            doc = {}
        if not 200 <= resp.status < 300:
            message = doc.get("message") if isinstance(doc, dict) else None
            raise KubeHttpError(f"{self.socket_path}: {method} {path}: {resp.status} {message or resp.reason}")
        return doc if isinstance(doc, dict) else {}

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """The objects of ``kind`` (in ``namespace``, or in all namespaces)."""
        items = self.request("GET", collection_path(kind, namespace)).get("items") or []
        return [dict(i, kind=kind) for i in items if isinstance(i, dict)]

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj``; its ``status`` is then written through the status subresource (a create drops it,
        except for Nodes), as a controller such as the kubelet would."""
        body = {k: v for k, v in obj.items() if k != "status" or obj["kind"] == "Node"}
        created = self.request("POST", collection_path(obj["kind"], obj["metadata"].get("namespace")), body)
        if obj.get("status") and obj["kind"] != "Node":
            created = self.request(
                "PATCH",
                object_path(obj) + "/status",
                {"status": obj["status"]},
                content_type="application/merge-patch+json",
            )
        return created
