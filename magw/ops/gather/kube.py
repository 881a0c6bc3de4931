"""A cluster's API server, as far as the kubeconfig may read it: magw's objects with their statuses.

Listed, each kind on its own (a kind the server does not serve, 404, is an empty list; a kind we may not read,
403, is recorded as failed and the others still come): Nodes, magw's CRs (Cluster, Endpoint, Gateway,
Submariner, the Globalnet kinds, ServiceExports, the egress gateway's EgressConfig and EgressVIP), magw's
ConfigMap and the Leases of magw's namespace (who holds which gateway). Never listed: Secrets, and Pods (a Pod's
spec may carry secret values in its environment). ``metadata.managedFields`` is dropped (noise). The kubeconfig
itself is never copied: ``kubeconfig.json`` says which server, context and user, and only the kinds of
credential the user has (``magw.ops.gather.redact.kubeconfig_summary``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import attrs
import yaml

from magw.ops.gather.archive import Archive
from magw.ops.gather.redact import kubeconfig_summary
from magw.ops.verify.kubeapi import request
from magw.sources.kube.mapping import CONFIG_MAP
from magw.sources.kube.resources import EGRESSGW_VERSION, GROUP, MCS_GROUP, MCS_VERSION, SUBMARINER_VERSION, VERSION


@attrs.frozen(kw_only=True)
class Kind:
    """One list: its kind and its path on the API server (``{ns}``: magw's namespace)."""

    kind: str
    path: str
    query: tuple[tuple[str, str], ...] = ()


def kinds(namespace: str) -> tuple[Kind, ...]:
    def crd(group: str, version: str, plural: str, *, namespaced: bool = True) -> str:
        return f"/apis/{group}/{version}" + (f"/namespaces/{namespace}" if namespaced else "") + f"/{plural}"

    return (
        Kind(kind="Node", path="/api/v1/nodes"),
        Kind(kind="Cluster", path=crd(GROUP, VERSION, "clusters")),
        Kind(kind="Endpoint", path=crd(GROUP, VERSION, "endpoints")),
        Kind(kind="Gateway", path=crd(GROUP, VERSION, "gateways")),
        Kind(kind="Submariner", path=crd(GROUP, SUBMARINER_VERSION, "submariners")),
        Kind(kind="ClusterGlobalEgressIP", path=crd(GROUP, VERSION, "clusterglobalegressips")),
        Kind(kind="GlobalEgressIP", path=crd(GROUP, VERSION, "globalegressips", namespaced=False)),
        Kind(kind="GlobalIngressIP", path=crd(GROUP, VERSION, "globalingressips", namespaced=False)),
        Kind(kind="ServiceExport", path=crd(MCS_GROUP, MCS_VERSION, "serviceexports", namespaced=False)),
        Kind(kind="EgressConfig", path=crd(GROUP, EGRESSGW_VERSION, "egressconfigs")),
        Kind(kind="EgressVIP", path=crd(GROUP, EGRESSGW_VERSION, "egressvips")),
        Kind(
            kind="ConfigMap",
            path=f"/api/v1/namespaces/{namespace}/configmaps",
            query=(("fieldSelector", f"metadata.name={CONFIG_MAP}"),),
        ),
        Kind(kind="Lease", path=f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"),
    )


@attrs.frozen(kw_only=True)
class Listed:
    kind: Kind
    items: list[dict[str, Any]] | None  # None: not read
    error: str | None
    seconds: float


def _trim(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


async def _list(api: Any, kind: Kind, timeout: float) -> Listed:
    started = time.monotonic()
    try:
        status, raw = await request(api, "GET", kind.path, query=list(kind.query), timeout=timeout)
    except Exception as exc:  # any failure of one list is recorded, the others still come
        status_code = getattr(exc, "status", None)
        detail = f"{status_code} {getattr(exc, 'reason', '')}".strip() if status_code else " ".join(str(exc).split())
        return Listed(kind=kind, items=None, error=detail or type(exc).__name__, seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    if status == 404:
        return Listed(kind=kind, items=[], error=None, seconds=seconds)
    if status >= 400:
        return Listed(kind=kind, items=None, error=f"{status} {raw.decode('utf-8', 'replace')[:200]}", seconds=seconds)
    try:
        body = json.loads(raw)
    except ValueError:
        return Listed(kind=kind, items=None, error="the answer is not JSON", seconds=seconds)
    items = body.get("items") if isinstance(body, dict) else None
    return Listed(kind=kind, items=[_trim(dict(i, kind=kind.kind)) for i in items or () if isinstance(i, dict)],
                  error=None, seconds=seconds)  # fmt: skip


async def _list_all(kubeconfig: str, wanted: Sequence[Kind], timeout: float) -> list[Listed]:
    from magw.sources.kube.client import api_client  # kubernetes-asyncio: only for this mode

    api = await api_client(kubeconfig)
    try:
        return [await asyncio.wait_for(_list(api, k, timeout), timeout + 1.0) for k in wanted]
    finally:
        await api.close()


def collect_kube(archive: Archive, prefix: str, kubeconfig: str, namespace: str) -> int:
    """Every kind above into ``<prefix>/<Kind>.json`` and the kubeconfig's summary; the number of kinds read.
    A kubeconfig that cannot be used is one failure (``KubeConfigError`` is left to the caller when it is the only
    source: see ``magw.ops.gather.run``)."""
    try:
        with open(kubeconfig, encoding="utf-8") as f:
            summary = kubeconfig_summary(yaml.safe_load(f))
        archive.add_doc(f"{prefix}/kubeconfig.json", summary, source=f"kubeconfig {kubeconfig} (credentials left out)")
    except (OSError, yaml.YAMLError) as exc:
        archive.fail(f"{prefix}/kubeconfig.json", f"kubeconfig {kubeconfig}", " ".join(str(exc).split()))
    wanted = kinds(namespace)
    listed = asyncio.run(_list_all(kubeconfig, wanted, archive.timeout))
    read = 0
    for result in listed:
        member = f"{prefix}/{result.kind.kind}.json"
        query = "&".join(f"{k}={v}" for k, v in result.kind.query)
        source = f"GET {result.kind.path}{'?' + query if query else ''} (kubeconfig {kubeconfig})"
        if result.items is None:
            archive.fail(member, source, result.error or "not read")
            continue
        read += 1
        archive.add_doc(member, result.items, source=source, seconds=round(result.seconds, 3))
    return read
