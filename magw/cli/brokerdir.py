"""The file broker a ``--broker-dir DIR --cluster ID`` command reads, with its bad input refused in one line.

A missing directory, or a cluster the directory has no Cluster document of (while every file in it was read), is
bad input: ``UsageError`` (exit 2). A Cluster document that is there but left out (a file that could not be read
or a document with a problem) is not: the caller's own failure (exit 1) says so.
"""

from __future__ import annotations

import os

from magw.cli import UsageError
from magw.sources.file.broker import FileBroker


def open_broker(directory: str, cluster: str) -> FileBroker:
    """A scanned ``FileBroker`` of ``directory`` for ``cluster``; ``UsageError`` for a directory or cluster that
    is not there at all."""
    if not os.path.isdir(directory):
        raise UsageError(f"--broker-dir: no such directory: {directory}")
    broker = FileBroker(directory, local_cluster=cluster)
    broker.scan()
    if broker.snapshot is None and not broker.problem_files():
        clusters = ", ".join(sorted(broker.cluster_ids())) or "none"
        raise UsageError(f"--cluster: {directory} has no cluster {cluster!r} (clusters: {clusters})")
    return broker
