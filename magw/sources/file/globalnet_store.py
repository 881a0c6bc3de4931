"""Where the Globalnet controller writes into the file broker: statuses and the objects it makes.

One file per status or object, written atomically: a temp file in the same directory (its name starts with
``.``, so the broker ignores it), fsync, rename over the old file, fsync the directory. A reader sees the old
document or the new one, never a mix, and a write that fails leaves the old document as it was.

File names (``@`` cannot occur in a cluster id or a Kubernetes name, so a name maps back to one object):

- ``globalnet-status@<cluster>@<kind>@<namespace or _>@<name>.yaml``: a ``GlobalnetStatus`` document;
- ``globalingressip@<cluster>@<namespace>@<name>.yaml``: a ``GlobalIngressIP`` the controller made;
- ``clusterglobalegressip@<cluster>@<name>.yaml``: a per-gateway ``ClusterGlobalEgressIP`` it made.

Only the controller writes these files; users write their objects in files of their own, so a status write
never races with a user's edit of the object.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from magw.model.globalnet import (
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    ClusterGlobalEgressIP,
    GlobalIngressIP,
    GlobalIPStatus,
    ObjectRef,
)
from magw.snapshot.dump import object_to_doc, status_to_doc
from magw.sources.file.atomic import fsync_dir, write_atomic

STATUS_PREFIX = "globalnet-status@"
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _part(value: str, what: str) -> str:
    if not _SAFE.match(value):
        raise ValueError(f"{what}: {value!r} must be letters, digits, '.', '_' or '-' (to be part of a file name)")
    return value


def status_prefix(cluster: str) -> str:
    """The prefix of every status file of ``cluster`` (for ``FileBroker.problem_files``)."""
    return f"{STATUS_PREFIX}{_part(cluster, 'cluster')}@"


def status_file(cluster: str, ref: ObjectRef) -> str:
    ns = _part(ref.namespace, "namespace") if ref.namespace else "_"
    return f"{status_prefix(cluster)}{_part(ref.kind, 'kind')}@{ns}@{_part(ref.name, 'name')}.yaml"


def object_file(cluster: str, ref: ObjectRef) -> str:
    c = _part(cluster, "cluster")
    if ref.kind == GLOBAL_INGRESS_IP:
        return f"globalingressip@{c}@{_part(ref.namespace, 'namespace')}@{_part(ref.name, 'name')}.yaml"
    if ref.kind == CLUSTER_GLOBAL_EGRESS_IP:
        return f"clusterglobalegressip@{c}@{_part(ref.name, 'name')}.yaml"
    raise ValueError(f"the controller makes no {ref.kind} objects")


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


class GlobalnetStore:
    """The controller's writes into one broker directory, for one cluster."""

    def __init__(self, directory: str | os.PathLike[str], cluster: str) -> None:
        self.directory = Path(directory)
        self.cluster = _part(cluster, "cluster")

    def _dump(self, kind: str, body: dict[str, Any]) -> str:
        # libyaml's emitter when present: the Python one was half of a controller pass (benchmarks/ipam_churn.py)
        return yaml.dump({"kind": kind, "cluster": self.cluster, **body}, Dumper=_DUMPER, sort_keys=False)

    def status_path(self, ref: ObjectRef) -> Path:
        return self.directory / status_file(self.cluster, ref)

    def write_status(self, ref: ObjectRef, status: GlobalIPStatus) -> None:
        self._check_ref(ref)
        write_atomic(self.status_path(ref), self._dump("GlobalnetStatus", status_to_doc(ref, status)))

    def delete_status(self, ref: ObjectRef) -> bool:
        """Remove the status document; True if there was one (a missing one is not an error)."""
        return _unlink(self.status_path(ref))

    def write_object(self, obj: ClusterGlobalEgressIP | GlobalIngressIP) -> None:
        kind = GLOBAL_INGRESS_IP if isinstance(obj, GlobalIngressIP) else CLUSTER_GLOBAL_EGRESS_IP
        ref = ObjectRef(kind, getattr(obj, "namespace", ""), obj.name)
        self._check_ref(ref)
        write_atomic(self.directory / object_file(self.cluster, ref), self._dump(kind, object_to_doc(obj)))

    def delete_object(self, ref: ObjectRef) -> bool:
        return _unlink(self.directory / object_file(self.cluster, ref))

    @staticmethod
    def _check_ref(ref: ObjectRef) -> None:
        status_file("x", ref)  # raises ValueError (one line) for a name that cannot be a file name part
