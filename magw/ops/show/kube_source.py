"""``magw show --kubeconfig FILE``: one cluster read from its API server as its Kubernetes source reads it.

One list of every input (``magw.sources.kube.oneshot``), mapped and assembled exactly as ``KubeSource`` does
(``magw.lab.observe.kube_view.documents``, the egress gateway's kinds included), so the snapshot is the one its
daemons plan with. The ``Gateway`` objects give each gateway's status as its gateway daemon wrote it (HA status,
connections with state and RTT). The cluster is ``--cluster``, else the cluster of the Endpoints whose hostname
is one of this API server's Nodes. No route agent status and no kernel: connections come from the Gateway
statuses (``--status-file`` adds a node's status file).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from magw import __version__
from magw.lab.observe.kube_view import documents
from magw.ops.show.broker_source import SourceError, status_files
from magw.ops.show.inputs import Inputs
from magw.sources.file.assemble import assemble
from magw.sources.kube.oneshot import list_once

Objects = Mapping[str, list[dict[str, Any]]]


def infer_cluster(objects: Objects) -> str | None:
    """The cluster whose Endpoints name this API server's Nodes; None when not exactly one does."""
    nodes = {(o.get("metadata") or {}).get("name") for o in objects.get("Node", ())}
    found = {
        (o.get("spec") or {}).get("cluster_id")
        for o in objects.get("Endpoint", ())
        if (o.get("spec") or {}).get("hostname") in nodes
    }
    found.discard(None)
    return str(found.pop()) if len(found) == 1 else None


def gateway_statuses(objects: Objects) -> dict[str, dict[str, Any]]:
    """Gateway object name (the node) -> its status."""
    return {
        str((o.get("metadata") or {}).get("name")): dict(o.get("status") or {})
        for o in objects.get("Gateway", ())
        if (o.get("metadata") or {}).get("name")
    }


def inputs_from_objects(
    objects: Objects, namespace: str, cluster: str | None, *, source: str, statuses: Mapping[str, Any] | None = None
) -> Inputs:
    """The inputs of one cluster's listed objects (pure but for the clock)."""
    cid = cluster or infer_cluster(objects)
    if cid is None:
        raise SourceError("--cluster: cannot tell which cluster this API server is (no Endpoint of its Nodes): "
                          "give --cluster ID")  # fmt: skip
    docs = documents(cid, namespace, objects)
    assembly = assemble(cid, docs, {})
    if assembly.snapshot is None:
        raise SourceError(f"cluster {cid!r}: its snapshot is incomplete ({assembly.missing or 'nothing to read'})")
    return Inputs(
        source=source,
        snapshots={cid: assembly.snapshot},
        statuses=dict(statuses or {}),
        gateway_statuses=gateway_statuses(objects),
        versions=({"component": "magw show", "where": "here", "version": __version__},),
        at=time.monotonic(),
    )


def read_kube(kubeconfig: str, namespace: str, cluster: str | None, statuses: Sequence[str] = ()) -> Inputs:
    objects = list_once(kubeconfig, namespace)
    return inputs_from_objects(
        objects, namespace, cluster, source=f"Kubernetes {kubeconfig} (namespace {namespace})",
        statuses=status_files(statuses),
    )  # fmt: skip
