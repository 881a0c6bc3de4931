"""The Endpoint documents a gateway daemon publishes in the broker directory: their file name, text, and how they
are written (atomically) and withdrawn."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from magw.model import Endpoint
from magw.snapshot.load import endpoint_doc
from magw.sources.file.atomic import write_atomic
from magw.sources.file.documents import check_name


def endpoint_path(directory: str | os.PathLike[str], cluster: str, hostname: str) -> Path:
    """``<directory>/endpoint-<cluster>@<hostname>.yaml``.

    ``@`` cannot occur in a name (``check_name``), so two gateways never share a file: with ``-`` cluster
    ``a-b`` host ``c`` and cluster ``a`` host ``b-c`` did, and one overwrote (or withdrew) the other's.
    """
    check_name(cluster, "cluster")
    check_name(hostname, "hostname")
    return Path(directory) / f"endpoint-{cluster}@{hostname}.yaml"


def render_endpoint(endpoint: Endpoint) -> str:
    """The Endpoint document's text, exactly as ``publish_endpoint`` writes it."""
    return yaml.safe_dump({"kind": "Endpoint", **endpoint_doc(endpoint)}, sort_keys=False)


def publish_endpoint(directory: str | os.PathLike[str], endpoint: Endpoint) -> Path:
    """Write the Endpoint document atomically (temp file in the same directory, fsync, rename)."""
    path = endpoint_path(directory, endpoint.cluster, endpoint.hostname)
    write_atomic(path, render_endpoint(endpoint))
    return path


def withdraw_endpoint(directory: str | os.PathLike[str], cluster: str, hostname: str) -> bool:
    """Remove the Endpoint document; True if there was one (a missing one is not an error)."""
    try:
        endpoint_path(directory, cluster, hostname).unlink()
    except FileNotFoundError:
        return False
    return True
