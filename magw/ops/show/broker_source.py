"""``magw show --broker-dir DIR``: every cluster's snapshot from a file broker directory, as its daemons read it.

The broker holds every cluster's documents; each cluster's snapshot is assembled as that cluster's route agents
assemble it (``FileBroker``, with the route agents' default Endpoint TTL: an Endpoint whose gateway stopped
touching it is gone, as it is for them). ``--cluster`` limits it to some clusters. ``--status-file`` adds route
agents' status files (a node's ``--status-file``) for the per-node parts.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from magw import __version__
from magw.daemons.route_agent.health_flags import DEFAULT_ENDPOINT_TTL
from magw.model import Snapshot
from magw.ops.show.inputs import Inputs
from magw.sources.file.broker import FileBroker


class SourceError(ValueError):
    """Bad input for a source (a directory, a cluster, a file that is not there); ``str()`` is one line."""


def broker_snapshots(
    directory: str | os.PathLike[str],
    clusters: Sequence[str] = (),
    *,
    endpoint_ttl: float | None = DEFAULT_ENDPOINT_TTL,
) -> dict[str, Snapshot]:
    """Cluster id -> its snapshot (clusters whose snapshot is incomplete are left out); ``clusters``: only these.
    ``endpoint_ttl``: the route agents' (None: an Endpoint never expires)."""
    path = Path(directory)
    if not path.is_dir():
        raise SourceError(f"--broker-dir: no such directory: {path}")
    probe = FileBroker(path, local_cluster="")
    probe.scan()
    known = sorted(probe.cluster_ids())
    if not known:
        raise SourceError(f"--broker-dir: {path} holds no Cluster document (is it a magw broker directory?)")
    for cid in clusters:
        if cid not in known:
            raise SourceError(f"--cluster: {path} has no cluster {cid!r} (clusters: {', '.join(known)})")
    out = {}
    for cid in clusters or known:
        broker = FileBroker(path, local_cluster=cid, endpoint_ttl=endpoint_ttl)
        broker.scan()
        if broker.snapshot is not None:
            out[cid] = broker.snapshot
    return out


def status_files(paths: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Node -> its route agent's status document, from ``--status-file`` paths (the node is the file's own)."""
    out = {}
    for p in paths:
        try:
            doc = json.loads(Path(p).read_text())
        except OSError as exc:
            raise SourceError(f"--status-file {p}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise SourceError(f"--status-file {p}: not JSON ({exc})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("node"), str):
            raise SourceError(f"--status-file {p}: not a route agent's status file (no node)")
        out[doc["node"]] = doc
    return out


def read_broker(
    directory: str,
    clusters: Sequence[str] = (),
    statuses: Sequence[str] = (),
    *,
    endpoint_ttl: float | None = DEFAULT_ENDPOINT_TTL,
) -> Inputs:
    return Inputs(
        source=f"file broker {directory}",
        snapshots=broker_snapshots(directory, clusters, endpoint_ttl=endpoint_ttl),
        statuses=status_files(statuses),
        versions=({"component": "magw show", "where": "here", "version": __version__},),
        at=time.monotonic(),
    )
