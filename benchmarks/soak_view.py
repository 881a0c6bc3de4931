"""Where the soak reads a cluster's snapshot: what the lab's daemons read, by the lab's control plane.

- ``file``: the broker directory, assembled by ``FileBroker`` exactly as each route agent's source does;
- ``kube``: the cluster's API server emulator, listed and assembled as ``KubeSource`` does
  (``magw.lab.observe.kube_view.cluster_snapshot``).

Either way the result is ``None`` while the snapshot is incomplete (or, for ``kube``, while the emulator does not
answer, as during the soak's ``kill-apiserver``): the soak's checks poll.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from magw.lab.build import state
from magw.lab.observe.kube_view import cluster_snapshot
from magw.model import Snapshot
from magw.sources.file.broker import FileBroker

SnapshotOf = Callable[[str], Snapshot | None]  # cluster id -> its snapshot now


def file_snapshots(broker_dir: Path) -> SnapshotOf:
    def snapshot_of(cluster: str) -> Snapshot | None:
        broker = FileBroker(broker_dir, local_cluster=cluster)
        broker.scan()
        return broker.snapshot

    return snapshot_of


def lab_snapshots(name: str) -> SnapshotOf:
    """The snapshots of lab ``name`` from its control plane (read from its state file)."""
    st = state.read(name)
    if st is None:
        raise RuntimeError(f"no lab {name}")
    if st.control_plane == "kube":
        return lambda cluster: cluster_snapshot(st, cluster)
    return file_snapshots(st.broker_dir)
