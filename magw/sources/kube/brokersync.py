"""Endpoints and Clusters between a cluster's API server and the broker's (docs/kubernetes.md, "Two API servers").

Level-driven, both ways, for the two kinds every cluster shares:

- **up**: the broker holds exactly the local cluster's own Endpoints and Cluster (``cluster_id`` = ours) that
  the local API server holds. One of ours that someone deleted from the broker is created again; one we
  deleted locally (withdrawn, tidied up) is deleted from the broker.
- **down**: the local API server holds exactly the other clusters' objects that the broker holds. A remote
  Endpoint the broker deleted is removed locally; a changed one is replaced.

Objects keep their names on both sides (``<cluster_id>-<hostname>`` for Endpoints, the cluster id for
Clusters), carry the label ``submariner.io/clusterID``, and are compared by spec.

**Nothing is deleted on a partial view.** A pass runs only when both sides' reflectors have completed a list
(a relist replaces a view only when it completes), so a broker that was unreachable, restarted or compacted
never makes us delete anything. While the broker is unreachable the local remote objects stay as they are:
the route agents keep their routes and the health probes keep failing over; nothing is flushed. Several
gateways may run the syncer at once (multi-active): they compute the same target, and a write that loses a
race (409, 404) is simply decided again on the next pass. When a pass runs is the trigger loop's
(``magw.reconcile.trigger``): on a change of either side after 50 ms (a burst of events, a relist, is one
pass; a lost race does not spin), and every ``resync``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import attrs
import structlog
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from magw.reconcile.trigger import DONE, Outcome, Trigger, Wake
from magw.sources.kube.crd import Crd
from magw.sources.kube.reflector import (
    API_ERRORS,
    DEFAULT_TIMING,
    Key,
    Obj,
    Reflector,
    Timing,
    WatchEvent,
    stop_all,
)
from magw.sources.kube.resources import GROUP, VERSION

log = structlog.get_logger(__name__)

CLUSTER_ID_LABEL = "submariner.io/clusterID"
KINDS = (("Endpoint", "endpoints"), ("Cluster", "clusters"))


def cluster_id(obj: Obj) -> str:
    return str((obj.get("spec") or {}).get("cluster_id") or "")


@attrs.frozen
class Write:
    """One write a pass wants: on ``side`` ('broker' or 'local'), ``action`` the object ``name`` of ``kind``."""

    side: str
    kind: str
    action: str  # 'ensure' or 'delete'
    name: str
    spec: Mapping[str, Any] | None = None
    current: Obj | None = None


def plan_sync(local_cluster: str, kind: str, local: Mapping[Key, Obj], broker: Mapping[Key, Obj]) -> list[Write]:
    """The writes that make both sides agree for one kind. Pure: the views in, the writes out."""
    by_name_local = {k[1]: o for k, o in local.items()}
    by_name_broker = {k[1]: o for k, o in broker.items()}
    writes: list[Write] = []
    for name, obj in sorted(by_name_local.items()):
        if cluster_id(obj) == local_cluster:  # ours: up
            current = by_name_broker.get(name)
            if current is None or current.get("spec") != obj.get("spec") or _label(current) != local_cluster:
                writes.append(Write("broker", kind, "ensure", name, obj.get("spec") or {}, current))
        elif name not in by_name_broker:  # a remote object the broker no longer holds
            writes.append(Write("local", kind, "delete", name, current=obj))
    for name, obj in sorted(by_name_broker.items()):
        owner = cluster_id(obj)
        if owner == local_cluster:
            if name not in by_name_local:  # ours, gone here: gone there
                writes.append(Write("broker", kind, "delete", name, current=obj))
            continue
        current = by_name_local.get(name)
        if current is None or current.get("spec") != obj.get("spec") or _label(current) != owner:
            writes.append(Write("local", kind, "ensure", name, obj.get("spec") or {}, current))
    return writes


def _label(obj: Obj) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(CLUSTER_ID_LABEL) or "")


class BrokerSync:
    """Runs ``plan_sync`` for Endpoints and Clusters whenever either side changes (and every ``resync``)."""

    def __init__(
        self,
        local_api: ApiClient,
        broker_api: ApiClient,
        *,
        local_cluster: str,
        namespace: str,
        broker_namespace: str,
        resync: float = 30.0,
        timing: Timing = DEFAULT_TIMING,
    ) -> None:
        self.local_cluster = local_cluster
        self.resync = resync
        self._trigger = Trigger("brokersync", self._pass, resync=resync, settle=0.05)
        self._stop = asyncio.Event()
        self.enabled = True  # the gateway clears it while it does not hold its lease
        self.passes = 0
        self.writes = 0
        self._failing: str | None = None
        self.crds: dict[tuple[str, str], Crd] = {}
        self.reflectors: dict[tuple[str, str], Reflector] = {}
        for side, api, ns in (("local", local_api, namespace), ("broker", broker_api, broker_namespace)):
            for kind, plural in KINDS:
                crd = Crd(api, plural, kind, ns)
                self.crds[(side, kind)] = crd
                self.reflectors[(side, kind)] = Reflector(
                    kind=f"{side}/{kind}",
                    list_fn=crd._objects.list_namespaced_custom_object,
                    args=(GROUP, VERSION, ns, plural),
                    on_change=self._changed,
                    timing=timing,
                )

    def _changed(self, _events: list[WatchEvent]) -> None:
        self._trigger.mark_dirty("watch")

    @property
    def synced(self) -> bool:
        return all(r.synced for r in self.reflectors.values())

    def planned(self) -> list[Write]:
        writes: list[Write] = []
        for kind, _ in KINDS:
            local, broker = self.reflectors[("local", kind)].objects, self.reflectors[("broker", kind)].objects
            writes += plan_sync(self.local_cluster, kind, local, broker)
        return writes

    async def sync_once(self) -> int:
        """One pass; the number of writes that landed. Nothing happens before both sides have listed."""
        if not self.synced or not self.enabled:
            return 0
        self.passes += 1
        done = 0
        for write in self.planned():
            crd = self.crds[(write.side, write.kind)]
            try:
                if write.action == "delete":
                    rv = str(((write.current or {}).get("metadata") or {}).get("resourceVersion") or "") or None
                    await crd.delete(write.name, rv)
                else:
                    labels = {CLUSTER_ID_LABEL: cluster_id({"spec": write.spec})}
                    await crd.ensure_spec(write.name, write.spec or {}, write.current, labels)
            except API_ERRORS as exc:
                self._failed(write, exc)
                continue
            done += 1
            log.info("brokersync.write", side=write.side, kind=write.kind, action=write.action, name=write.name)
        if done:
            self._failing = None
        self.writes += done
        return done

    def _failed(self, write: Write, exc: BaseException) -> None:
        state = f"{write.side} {write.kind} {write.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        conflict = isinstance(exc, ApiException) and exc.status in (404, 409)
        if state != self._failing:
            (log.info if conflict else log.warning)("brokersync.write_failed", error=state, retried="next pass")
        self._failing = state
        if conflict:  # a lost race: look again as soon as the views move on
            self._trigger.mark_dirty("conflict")

    async def run(self) -> None:
        tasks = [asyncio.create_task(r.run(), name=f"brokersync-{r.kind}") for r in self.reflectors.values()]
        try:
            await self._trigger.run(self._stop)
        finally:
            await stop_all(self.reflectors.values(), tasks)

    def stop(self) -> None:
        self._stop.set()

    def mark_dirty(self, reason: str) -> None:
        """Run a pass soon; ``reason`` says why (the gateway calls it when it wins its lease)."""
        self._trigger.mark_dirty(reason)

    async def _pass(self, _wake: Wake) -> Outcome:
        await self.sync_once()  # an API error is one write's (``_failed``), never the pass's
        return DONE
