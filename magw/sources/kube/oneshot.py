"""One list of each input of a cluster, for a command that reads once (``magw show``), not a watching source.

``list_once(kubeconfig, namespace)`` lists what ``KubeSource`` lists (``magw.sources.kube.resources``, with the
Globalnet and egress gateway kinds) plus the ``Gateway`` objects the gateway daemons write their status to, and
returns plain JSON objects per kind. A kind the server does not serve (404: its CRD is not installed) is an empty
list; any other API error, or a server that cannot be reached, is ``KubeReadError`` with one line.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from magw.sources.kube.client import KubeConfigError, api_client
from magw.sources.kube.resources import GROUP, VERSION, Resource, _custom, resources

TIMEOUT = 10.0


class KubeReadError(RuntimeError):
    """The API server could not be read; ``str()`` is one line."""


def _inputs(namespace: str) -> tuple[Resource, ...]:
    gateways = Resource(kind="Gateway", call=_custom(GROUP, VERSION, "gateways", namespace))
    return (*resources(namespace, globalnet=True, workloads=True, egressgw=True), gateways)


async def _list(api: Any, resource: Resource, timeout: float) -> list[dict[str, Any]]:
    fn, args, kwargs = resource.call(api)
    response = await fn(*args, **kwargs, _preload_content=False, _request_timeout=timeout)
    try:
        raw = await response.read()
        status = response.status
    finally:
        response.release()
    if status == 404:
        return []  # a kind whose CRD is not installed: nothing of it
    if status >= 400:
        raise KubeReadError(f"list {resource.kind}: {status} {raw.decode('utf-8', 'replace')[:200]}")
    body = json.loads(raw)
    items = body.get("items") if isinstance(body, dict) else None
    return [dict(i, kind=resource.kind) for i in items or () if isinstance(i, dict)]


async def _list_all(kubeconfig: str, namespace: str, timeout: float) -> dict[str, list[dict[str, Any]]]:
    api = await api_client(kubeconfig)
    try:
        out = {}
        for resource in _inputs(namespace):
            out[resource.kind] = await _list(api, resource, timeout)
        return out
    finally:
        await api.close()


def list_once(kubeconfig: str, namespace: str, *, timeout: float = TIMEOUT) -> dict[str, list[dict[str, Any]]]:
    """Kind -> its objects (``KubeConfigError`` for a bad kubeconfig, ``KubeReadError`` for an API failure)."""
    try:
        return asyncio.run(_list_all(kubeconfig, namespace, timeout))
    except KubeConfigError:
        raise
    except (aiohttp.ClientError, OSError, TimeoutError, ApiException, ValueError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise KubeReadError(f"kubeconfig {kubeconfig}: cannot read the API server: {detail}") from None
