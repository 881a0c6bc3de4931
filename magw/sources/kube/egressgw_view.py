"""The egress controller's reading of Kubernetes: the ``KubeSource`` with its own recent writes laid over.

The file broker reads back a write at the next scan; the Kubernetes source only once the watch brings it. The
controller reads again right after a write (an API answer carries the new bindings and status), so
``KubeEgressView`` shows, for each VIP the ``KubeEgressStore`` wrote, what was written, until the source has
seen the object at the resourceVersion the write returned (or a later one), or ``hold`` seconds passed (a
watch that never brings it: the source's word wins again). Everything else is the source's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from magw.model import Snapshot
from magw.sources.kube.egressgw_store import KubeEgressStore, Written
from magw.sources.kube.source import KubeSource


def _newer_or_same(seen: str, written: str) -> bool:
    """The source has seen ``written`` or later (resourceVersions compared as numbers when both are: etcd's
    are; an opaque one counts only when equal)."""
    if seen == written:
        return True
    if seen.isdigit() and written.isdigit():
        return int(seen) >= int(written)
    return False


def overlay(snapshot: Snapshot, written: Mapping[str, Written]) -> Snapshot:
    """``snapshot`` with the written VIPs and statuses in place of the source's."""
    if not written:
        return snapshot
    egress = snapshot.egressgw
    vips = [w.vip if (w := written.get(v.name)) is not None and w.vip is not None else v for v in egress.vips]
    statuses = dict(egress.statuses)
    for name, w in written.items():
        if w.status is not None:
            statuses[name] = w.status
        elif w.status_deleted:
            statuses.pop(name, None)
    return attrs.evolve(snapshot, egressgw=attrs.evolve(egress, vips=vips, statuses=tuple(statuses.items())))


class KubeEgressView:
    """A ``StateSource`` for ``EgressController``: ``source``'s snapshot with ``store``'s recent writes."""

    def __init__(
        self,
        source: KubeSource,
        store: KubeEgressStore,
        *,
        hold: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.store = store
        self.local_cluster = source.local_cluster
        self.hold = hold
        self._clock = clock

    def seen(self, name: str) -> str:
        """The resourceVersion of EgressVIP ``name`` as this controller knows it ("" if none): its own last write
        while the source has not seen that yet (two API requests in a row must not refuse the second as
        "changed meanwhile" by our own first), else the source's."""
        written = self._pending().get(name)
        return written.resource_version if written is not None and written.resource_version else self._source_rv(name)

    def _source_rv(self, name: str) -> str:
        obj = self.source.objects("EgressVIP").get((self.source.namespace, name))
        return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")

    def _pending(self) -> dict[str, Written]:
        now = self._clock()
        for name, w in list(self.store.written.items()):
            if now - w.at > self.hold or _newer_or_same(self._source_rv(name), w.resource_version):
                del self.store.written[name]
        return dict(self.store.written)

    @property
    def directory(self) -> Any:
        return self.source.directory

    @property
    def snapshot(self) -> Snapshot | None:
        snapshot = self.source.snapshot
        return None if snapshot is None else overlay(snapshot, self._pending())

    @property
    def initial_sync_done(self) -> bool:
        return self.source.initial_sync_done

    def local_node_document(self, name: str) -> Mapping[str, Any] | None:
        return self.source.local_node_document(name)

    def problem_files(self, prefix: str = "") -> frozenset[str]:
        return self.source.problem_files(prefix)

    def subscribe(self, listener: Callable[[Snapshot | None], None]) -> Callable[[], None]:
        return self.source.subscribe(listener)

    def scan(self) -> bool:
        return self.source.scan()

    async def run(self) -> None:
        await self.source.run()

    def stop(self) -> None:
        self.source.stop()
