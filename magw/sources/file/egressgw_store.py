"""Where the egress controller writes into the file broker: VIP statuses, and VIPs whose bindings it changed.

Every write is atomic (``magw.sources.file.atomic``): a reader sees the old document or the new one.

- ``egress-status@<cluster>@<vip>.yaml``: an ``EgressVIPStatus``; only the controller writes these.
- An ``EgressVIP`` changed through the API (bind/unbind) is written back to the file that holds it, when that
  file holds nothing else; a VIP defined in a file together with other documents is refused (``StoreRefused``)
  rather than rewriting the user's other documents: move it to a file of its own (the store's name for it is
  ``egressvip@<cluster>@<vip>.yaml``). A VIP the broker has in no file is written under that name. Comments in
  a rewritten file are not kept.

The VIP's file is found by reading the directory's files that mention ``EgressVIP`` (only on a write).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from magw.model.egressgw import EgressVIP, EgressVIPStatus
from magw.snapshot.egressgw import status_to_doc, vip_to_doc
from magw.sources.file.atomic import fsync_dir, write_atomic
from magw.sources.file.documents import DocumentError, parse_file

STATUS_PREFIX = "egress-status@"
VIP_PREFIX = "egressvip@"
SUFFIXES = (".yaml", ".yml")
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class StoreRefused(Exception):
    """The store will not write this (one line): nothing was written."""


def _part(value: str, what: str) -> str:
    if not _SAFE.match(value):
        raise ValueError(f"{what}: {value!r} must be letters, digits, '.', '_' or '-' (to be part of a file name)")
    return value


def status_prefix(cluster: str) -> str:
    return f"{STATUS_PREFIX}{_part(cluster, 'cluster')}@"


class EgressStore:
    """The egress controller's writes into one broker directory, for one cluster."""

    def __init__(self, directory: str | os.PathLike[str], cluster: str) -> None:
        self.directory = Path(directory)
        self.cluster = _part(cluster, "cluster")

    def _dump(self, kind: str, body: dict[str, Any]) -> str:
        return yaml.dump({"kind": kind, "cluster": self.cluster, **body}, Dumper=_DUMPER, sort_keys=False)

    def status_path(self, name: str) -> Path:
        return self.directory / f"{status_prefix(self.cluster)}{_part(name, 'name')}.yaml"

    def write_status(self, name: str, status: EgressVIPStatus) -> None:
        write_atomic(self.status_path(name), self._dump("EgressVIPStatus", status_to_doc(name, status)))

    def delete_status(self, name: str) -> bool:
        """Remove the status document; True if there was one (a missing one is not an error)."""
        path = self.status_path(name)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        fsync_dir(path.parent)
        return True

    def vip_path(self, name: str) -> Path:
        """The store's own file name for a VIP (used when the broker has it in no file)."""
        return self.directory / f"{VIP_PREFIX}{self.cluster}@{_part(name, 'name')}.yaml"

    def _locate(self, name: str) -> tuple[Path, int] | None:
        """The file holding the VIP's document and how many documents that file holds."""
        ident = ("EgressVIP", self.cluster, name)
        candidates = [self.vip_path(name)]
        try:
            with os.scandir(self.directory) as it:
                names = sorted(e.name for e in it if not e.name.startswith(".") and e.name.endswith(SUFFIXES))
        except FileNotFoundError:
            return None
        candidates += [self.directory / n for n in names if self.directory / n != candidates[0]]
        for path in candidates:
            try:
                text = path.read_text(encoding="utf-8")
            except (FileNotFoundError, UnicodeDecodeError):
                continue
            if "EgressVIP" not in text:
                continue
            try:
                docs = parse_file(text, file=path.name)
            except DocumentError:
                continue
            if any(d.ident == ident for d in docs):
                return path, len(docs)
        return None

    def vip_file(self, name: str) -> Path:
        """Where ``write_vip`` would write VIP ``name``; ``StoreRefused`` when it would not."""
        found = self._locate(name)
        if found is None:
            return self.vip_path(name)
        path, count = found
        if count > 1:
            raise StoreRefused(
                f"VIP {name} is defined in {path.name} together with {count - 1} other document(s): move it to a "
                f"file of its own (e.g. {self.vip_path(name).name}) to change it through the API"
            )
        return path

    def write_vip(self, vip: EgressVIP) -> Path:
        path = self.vip_file(vip.name)
        write_atomic(path, self._dump("EgressVIP", vip_to_doc(vip)))
        return path
