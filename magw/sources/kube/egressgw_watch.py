"""The egress agent's snapshots from Kubernetes: what ``FileBroker.watch()`` yields, from a ``KubeSource``.

``magw-egress-agent --source kube`` only reads (its reports go to the controller's API): the Nodes, the
EgressConfig ``default`` and the EgressVIPs of magw's namespace; no workloads (keepalived and conntrackd need
VIPs, candidates and node addresses, nothing about pods). ``kube_snapshots`` opens the client, runs the source
and yields its snapshot after the first complete list and after every change; leaving the iteration stops the
source and closes the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

from kubernetes_asyncio.client import ApiClient

from magw.model import Snapshot
from magw.sources.kube.client import api_client
from magw.sources.kube.source import KubeSource


def agent_source(api: ApiClient, *, cluster: str, namespace: str) -> KubeSource:
    """The agent's source: egress kinds and nodes, neither Globalnet nor workloads."""
    return KubeSource(api, local_cluster=cluster, namespace=namespace, globalnet=False, workloads=False, egressgw=True)


async def snapshots(source: KubeSource) -> AsyncIterator[Snapshot | None]:
    """Run ``source``; yield its snapshot after the first complete list and after each change. A source that
    ends by itself (it should not) ends the iteration, raising what it raised."""
    changed = asyncio.Event()
    unsubscribe = source.subscribe(lambda _snapshot: changed.set())
    task = asyncio.create_task(source.run(), name="egress-agent-source")
    try:
        while True:
            waiter = asyncio.ensure_future(changed.wait())
            try:
                await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if task.done():
                task.result()
                return
            changed.clear()
            yield source.snapshot
    finally:
        unsubscribe()
        source.stop()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(task, 5)


async def kube_snapshots(
    kubeconfig: str | os.PathLike[str] | None, *, cluster: str, namespace: str
) -> AsyncIterator[Snapshot | None]:
    """``snapshots`` of the agent's source over a client of its own (closed when the iteration ends)."""
    api = await api_client(kubeconfig)
    try:
        async for snap in snapshots(agent_source(api, cluster=cluster, namespace=namespace)):
            yield snap
    finally:
        await api.close()
