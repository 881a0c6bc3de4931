"""What the daemons read from a state source: the file broker (``FileBroker``) or Kubernetes (``KubeSource``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from magw.model import Snapshot


class StateSource(Protocol):
    """The Snapshot of one local cluster, kept up to date by ``run()``.

    ``initial_sync_done`` is True once every input was read completely at least once: only then may a consumer
    delete what the snapshot lacks. ``directory`` names the source in logs and waiting messages."""

    local_cluster: str

    @property
    def directory(self) -> Any: ...

    @property
    def snapshot(self) -> Snapshot | None: ...

    @property
    def initial_sync_done(self) -> bool: ...

    def local_node_document(self, name: str) -> Mapping[str, Any] | None: ...

    def problem_files(self, prefix: str = "") -> frozenset[str]: ...

    def subscribe(self, listener: Callable[[Snapshot | None], None]) -> Callable[[], None]: ...

    def scan(self) -> bool: ...

    async def run(self) -> None: ...

    def stop(self) -> None: ...
