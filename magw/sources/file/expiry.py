"""Which Endpoint documents of the file broker leave the snapshot because their heartbeat stopped.

A file holding an Endpoint document and not modified (written or touched) for longer than the broker's TTL is
*stale*. A stale file *expires* (its Endpoints leave the snapshot) only while every cluster it publishes for still
has an Endpoint in a file that is not stale. When every Endpoint of a cluster is stale, they are all *kept*: fail
static, as the planner keeps every gateway of a cluster when health allows none (magw.desired.node.paths). A
cluster's only gateway whose daemon is restarting (a Python start on a loaded node takes seconds) then stays a
gateway: the route agents keep routing to it, and its own route agent keeps answering its peers' probes, instead of
every peer removing the cluster's routes until the daemon is back. Its peers still see a dead node as down through
their probes. A gateway that leaves for good withdraws its document (``magw-gateway --withdraw-on-exit``).

Pure: the broker gives the stamps and clusters of its Endpoint files, and logs the transitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from magw.sources.file.documents import Document


@attrs.frozen(kw_only=True)
class Expiry:
    """``expired``: stale files whose Endpoints leave the snapshot; ``kept``: stale files kept in it because some
    cluster of theirs has no fresh Endpoint."""

    expired: frozenset[str] = frozenset()
    kept: frozenset[str] = frozenset()


def endpoint_clusters(docs: Iterable[Document]) -> frozenset[str]:
    """The clusters the Endpoint documents among ``docs`` publish for (empty: not an Endpoint file)."""
    return frozenset(d.ident[1] for d in docs if d.kind == "Endpoint")


def expiry(endpoint_files: Mapping[str, tuple[int, frozenset[str]]], oldest_mtime_ns: float) -> Expiry:
    """``endpoint_files``: file name -> (mtime in ns, the clusters its Endpoints publish for). A file modified
    before ``oldest_mtime_ns`` is stale."""
    stale = {name for name, (mtime, _) in endpoint_files.items() if mtime < oldest_mtime_ns}
    if not stale:
        return Expiry()
    fresh: set[str] = set()
    for name, (_, clusters) in endpoint_files.items():
        if name not in stale:
            fresh |= clusters
    expired = frozenset(name for name in stale if endpoint_files[name][1] <= fresh)
    return Expiry(expired=expired, kept=frozenset(stale) - expired)
