"""The emulator's state on disk (``--persist FILE``): it survives a SIGKILL, as an API server's etcd does.

Every write (create, update, delete) rewrites FILE before the request is answered: what a client saw acknowledged
is in the file. The whole state is written each time (a temporary file renamed over it, mode 0600: it can hold
Secrets and tokens), which is fine at a lab's size (hundreds of objects, a few ms) and is not meant for more. No
fsync: the page cache outlives a killed process, which is the fault this models, not a machine's crash.

On start, an existing FILE is loaded: objects keep their uid and creation time and get resourceVersions above the
saved one, and the history before them is compacted, so a client that watches from a version it saw before the
restart gets 410 Expired and lists again, as after an etcd compaction. That is what the lab's soak exercises.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from magw.kubeemu.history import HistoryEvent
from magw.kubeemu.store import Store

FORMAT = "magw.kubeemu/v1"


class Persister:
    """Subscribed to a ``Store``: writes its whole state to ``path`` after every write."""

    def __init__(self, store: Store, path: Path) -> None:
        self.store = store
        self.path = path
        self.writes = 0

    def restore(self) -> int:
        """Load ``path`` if it exists (before serving); returns how many objects. ValueError for a bad file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{self.path}: not a saved state ({err.msg} at line {err.lineno})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("items"), list):
            raise ValueError(f"{self.path}: not a saved state of this emulator (format {FORMAT!r} expected)")
        saved_rv = doc.get("resourceVersion")
        if not isinstance(saved_rv, int) or saved_rv < 1:
            raise ValueError(f"{self.path}: resourceVersion must be a positive integer")
        self.store.rv = max(self.store.rv, saved_rv)
        count = self.store.load(doc["items"])
        self.store.compact()
        return count

    def start(self) -> None:
        """Write the state now and after every write from here on."""
        self.store.subscribe(self)
        self.save()

    def offer(self, ev: HistoryEvent) -> None:  # the Store's Subscriber: called inside the write, before the reply
        del ev
        self.save()

    def save(self) -> None:
        doc: dict[str, Any] = {"format": FORMAT, "resourceVersion": self.store.rv, "items": self.store.dump()}
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))
        os.replace(tmp, self.path)
        self.writes += 1
