"""The Kubernetes source: the same Snapshot as the file broker, from one cluster's API server.

``KubeSource`` offers what the daemons use of ``FileBroker`` (``snapshot``, ``initial_sync_done``,
``local_cluster``, ``local_node_document``, ``problem_files``, ``subscribe``, ``scan``, ``run``, ``stop``), so the
route agent, the gateway and the Globalnet controller take either. Inside, one ``Reflector`` per resource
(``magw.sources.kube.resources``) keeps the raw objects; each object is mapped into the file broker's
documents as its event arrives (``magw.sources.kube.mapping``), and the documents are assembled into the
Snapshot by the broker's own ``assemble()`` (bad documents left out, last good versions kept).

``initial_sync_done`` turns True only once *every* reflector has completed its first list and the snapshot
was assembled from all of them: until then the reconciler prunes nothing (``inputs_synced``). A relist (410,
a restarted API server) replaces a reflector's objects only when it completes, so the snapshot never shows a
half-listed resource; while the API server is unreachable the last snapshot stays as it is.

Assembling is incremental (``magw.sources.file.incremental``): the local cluster's Globalnet documents (Namespaces,
Pods, Services, ServiceExports, the Globalnet kinds and their statuses) are parsed again only when their object
changed, the rest (Clusters, the Config, Nodes, Endpoints, the egress gateway's kinds) as a whole when one of
them changed, as the file broker does. It runs in one worker thread, at most once per ``coalesce`` seconds
however many events arrive (a burst of pod events is one assembly), off the event loop that carries the health
probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiClient

from magw.model import Snapshot
from magw.snapshot.cache import SnapshotParser
from magw.snapshot.load import SnapshotError
from magw.sources.file.assemble import Parse
from magw.sources.file.documents import Document
from magw.sources.file.incremental import IncrementalAssembly
from magw.sources.file.items import Changes, DuplicateItem, ItemSlots
from magw.sources.kube import mapping
from magw.sources.kube.reflector import (
    DEFAULT_TIMING,
    Key,
    Obj,
    Reflector,
    Timing,
    WatchEvent,
    resource_version,
    stop_all,
)
from magw.sources.kube.resources import Resource, resources
from magw.util.aio import wait_first

log = structlog.get_logger(__name__)

Listener = Callable[[Snapshot | None], None]

_GLOBALNET_KINDS = ("ClusterGlobalEgressIP", "GlobalEgressIP", "GlobalIngressIP")
# The resources whose documents are all Globalnet documents: assembled one object at a time (``ItemSlots``).
_ITEM_KINDS = frozenset(("Namespace", "Pod", "Service", "ServiceExport", *_GLOBALNET_KINDS))


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class KubeSource:
    """Follows one cluster's API server and keeps the Snapshot of ``local_cluster`` up to date."""

    def __init__(
        self,
        api: ApiClient,
        *,
        local_cluster: str,
        namespace: str,
        globalnet: bool = True,
        workloads: bool = True,
        egressgw: bool = False,
        parse: Parse | None = None,
        coalesce: float = 0.02,
        timing: Timing = DEFAULT_TIMING,
    ) -> None:
        self.api = api
        self.local_cluster = local_cluster
        self.namespace = namespace
        self.directory = f"the Kubernetes API (namespace {namespace})"  # what logs and waiting messages name
        # None: a SnapshotParser of its own, which re-parses only what changed (magw.snapshot.cache)
        self._parse: Parse = parse if parse is not None else SnapshotParser()
        self.coalesce = coalesce
        self.reflectors: dict[str, Reflector] = {}
        for resource in resources(namespace, globalnet=globalnet, workloads=workloads, egressgw=egressgw):
            self.reflectors[resource.kind] = self._reflector(resource, timing)
        self._docs: dict[tuple[str, Key], tuple[Document, ...]] = {}  # the core's (the rest: ``_items``)
        self._items: ItemSlots[tuple[str, Key]] = ItemSlots()
        self._assembly = IncrementalAssembly(local_cluster, parse=self._parse)
        self._errors: dict[tuple[str, Key], mapping.MappingError] = {}
        self._versions: dict[tuple[str, Key], str] = {}  # the resourceVersion each object was mapped at
        self._logged_errors: dict[tuple[str, Key], str] = {}
        self._logged_problems: set[tuple[str, str]] = set()
        self._missing_logged: str | None = None
        self._snapshot: Snapshot | None = None
        self._accepted: tuple[Document, ...] = ()
        self._problem_files: frozenset[str] = frozenset()
        self._synced = False
        self._listeners: list[Listener] = []
        self._dirty = asyncio.Event()
        self._stop = asyncio.Event()
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self.assemblies = 0
        self._version = 0  # bumped by every event; the snapshot was assembled from version ``_assembled``
        self._assembled = -1

    def _reflector(self, resource: Resource, timing: Timing) -> Reflector:
        fn, args, kwargs = resource.call(self.api)
        return Reflector(
            kind=resource.kind,
            list_fn=fn,
            args=args,
            kwargs=kwargs,
            on_change=functools.partial(self._on_change, resource.kind),
            timing=timing,
        )

    # ----- what consumers read (the FileBroker interface) -----------------------------------------------

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    @property
    def initial_sync_done(self) -> bool:
        return self._synced

    @property
    def inputs_listed(self) -> bool:
        """Every reflector has completed at least one list."""
        return all(r.synced for r in self.reflectors.values())

    def objects(self, kind: str) -> Mapping[Key, Obj]:
        """The raw objects of one resource as last listed and watched (empty if not watched)."""
        reflector = self.reflectors.get(kind)
        return reflector.objects if reflector is not None else {}

    def local_node_document(self, name: str) -> Mapping[str, Any] | None:
        for doc in self._accepted:
            if doc.ident == ("Node", self.local_cluster, name):
                return doc.fields
        return None

    def problem_files(self, prefix: str = "") -> frozenset[str]:
        return frozenset(name for name in self._problem_files if name.startswith(prefix))

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # ----- mapping events into documents ----------------------------------------------------------------

    def _map(self, kind: str, obj: Obj) -> tuple[Document, ...]:
        cluster = self.local_cluster
        if kind == "Node":
            return mapping.node_docs(obj, cluster)
        if kind == "Cluster":
            return mapping.cluster_docs(obj)
        if kind == "Endpoint":
            return mapping.endpoint_docs(obj)
        if kind == "Namespace":
            return mapping.namespace_docs(obj, cluster)
        if kind == "Pod":
            return mapping.pod_docs(obj, cluster)
        if kind == "Service":
            return mapping.service_docs(obj, cluster, self._slices_of(obj))
        if kind == "ServiceExport":
            return mapping.service_export_docs(obj, cluster)
        if kind in _GLOBALNET_KINDS:
            return mapping.globalnet_docs(kind, obj, cluster)
        if kind == "EgressVIP":
            return mapping.egress_vip_docs(obj, cluster)
        if kind == "EgressConfig":
            return mapping.egress_config_docs(obj, cluster)
        return ()  # EndpointSlice, Submariner, ConfigMap: folded into Service and Config documents

    def _slices_of(self, service: Obj) -> list[Obj]:
        meta = service.get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        return [
            s
            for (s_ns, _), s in self.objects("EndpointSlice").items()
            if s_ns == ns and ((s.get("metadata") or {}).get("labels") or {}).get(mapping.SERVICE_NAME_LABEL) == name
        ]

    def _remap(self, kind: str, key: Key, obj: Obj | None) -> None:
        slot = (kind, key)
        if obj is None:
            self._drop(slot)
            return
        self._versions[slot] = resource_version(obj)
        try:
            docs = self._map(kind, obj)
            if kind in _ITEM_KINDS:
                self._items.set(slot, docs)
            else:
                self._docs[slot] = docs
            self._errors.pop(slot, None)
        except mapping.MappingError as exc:  # the object's last good documents stay in use
            self._errors[slot] = exc
        except DuplicateItem as exc:  # another object's document has its identity: the first one stays
            self._errors[slot] = mapping.MappingError(str(exc))

    def _drop(self, slot: tuple[str, Key]) -> None:
        self._versions.pop(slot, None)
        self._docs.pop(slot, None)
        if slot in self._items:
            self._items.drop(slot)
        self._errors.pop(slot, None)

    def _on_change(self, kind: str, events: list[WatchEvent]) -> None:
        for event in events:
            if event.type == "SYNCED":  # a complete (re)list: map again every object of this kind that changed
                slots = self._items.slots() if kind in _ITEM_KINDS else list(self._docs)
                for slot in [s for s in slots if s[0] == kind] + [s for s in self._errors if s[0] == kind]:
                    if slot[1] not in self.objects(kind):
                        self._drop(slot)
                # Shaped for speed: this runs on the loop that carries the health probes. Mapping 100k pods again
                # took 2.7 s there after every relist (a 410 on the Pod watch); an object whose resourceVersion is
                # the one it was mapped at is the same object (the API's guarantee), so its documents stand. A
                # Service's documents depend on its EndpointSlices too: always mapped again.
                for key, obj in self.objects(kind).items():
                    version = resource_version(obj)
                    if kind == "Service" or not version or self._versions.get((kind, key)) != version:
                        self._remap(kind, key, obj)
                if kind == "EndpointSlice":
                    self._remap_services(None)
            elif kind == "EndpointSlice":
                self._remap_services(event.key[0])
            else:
                self._remap(kind, event.key, event.obj)
        self._version += 1
        self._dirty.set()

    def _remap_services(self, namespace: str | None) -> None:
        for key, obj in self.objects("Service").items():
            if namespace is None or key[0] == namespace:
                self._remap("Service", key, obj)

    # ----- assembling ---------------------------------------------------------------------------------

    def _documents(self) -> list[Document]:
        docs: list[Document] = []
        for slot in sorted(self._docs):
            docs.extend(self._docs[slot])
        submariner = self.objects("Submariner").get((self.namespace, mapping.SUBMARINER))
        config_map = self.objects("ConfigMap").get((self.namespace, mapping.CONFIG_MAP))
        try:
            docs.extend(mapping.config_docs(submariner, config_map))
            self._errors.pop(("Config", ("", "")), None)
        except mapping.MappingError as exc:
            self._errors[("Config", ("", ""))] = exc
            # read on the loop while a pass may replace the dict (never changed in place): either one is whole
            docs.extend(d for d in self._assembly.last_good.values() if d.kind == "Config")
        return docs

    def documents(self) -> list[Document]:
        """Every document as the objects map now, the core's and the Globalnet ones (for tools, and the
        benchmark that assembles them as a whole beside the incremental assembly: benchmarks/kube_source_scale.py)."""
        return [*self._documents(), *self._items.documents()]

    def _assemble(
        self, docs: list[Document], changes: Changes, errors: Mapping[tuple[str, Key], mapping.MappingError]
    ) -> bool:
        """Assemble the core ``docs`` and the changed Globalnet documents; True when the snapshot changed."""
        try:
            assembly = self._assembly.assemble(docs, changes, config_refused=("Config", ("", "")) in errors)
        except SnapshotError as exc:  # the walk accepted only valid steps; this would be a bug
            log.error("kube.assemble_failed", cluster=self.local_cluster, error=str(exc))
            return False
        self.assemblies += 1
        self._report(assembly.problems, assembly.missing, errors)
        self._problem_files = frozenset(p.file for p in assembly.problems) | frozenset(
            f"kube:{kind}/{'/'.join(p for p in key if p)}" for (kind, key) in errors
        )
        changed = assembly.snapshot != self._snapshot
        self._snapshot, self._accepted = assembly.snapshot, assembly.accepted
        return changed

    def _report(
        self, problems: Any, missing: str | None, errors: Mapping[tuple[str, Key], mapping.MappingError]
    ) -> None:
        """Log each problem once, until it changes (as the file broker does)."""
        for slot, exc in errors.items():
            error = str(exc)
            if self._logged_errors.get(slot) != error:
                if isinstance(exc, mapping.NotYet):  # filled in by someone else soon (a route agent's annotation)
                    log.info("kube.object_not_ready", kind=slot[0], reason=error)
                else:
                    kept = slot in self._docs or slot in self._items
                    log.warning("kube.bad_object", kind=slot[0], error=error, kept_last_good=kept)
        self._logged_errors = {slot: str(exc) for slot, exc in errors.items()}
        current = {(p.file, p.error) for p in problems}
        for p in problems:
            if (p.file, p.error) not in self._logged_problems:
                log.warning("kube.bad_document", file=p.file, error=p.error, kept_last_good=p.kept_last_good)
        self._logged_problems = current
        if missing is not None and missing != self._missing_logged:
            log.info("kube.incomplete", cluster=self.local_cluster, missing=missing)
        self._missing_logged = missing

    def scan(self) -> bool:
        """Assemble from what the reflectors hold now; True when the snapshot changed. Listeners are called.
        Before every reflector has listed once this only reports that nothing is complete yet.

        Called from another thread than the running source's loop (the Globalnet controller's pass runs in a
        worker thread), the pass runs on that loop, where the reflectors change their objects, and this
        thread waits for it."""
        loop = self._loop
        if loop is not None and loop.is_running() and not _on_loop(loop):
            return asyncio.run_coroutine_threadsafe(self._scan_on_loop(), loop).result()
        if (self._synced and self._assembled == self._version) or not self.inputs_listed:
            return False  # nothing arrived since the last assembly, or not every input is there yet
        changed = self._pass(self._documents(), self._items.take(), dict(self._errors), self._version)
        if changed:
            self._notify()
        return changed

    async def _scan_on_loop(self) -> bool:
        return self.scan()

    def _pass(
        self,
        docs: list[Document],
        changes: Changes,
        errors: Mapping[tuple[str, Key], mapping.MappingError],
        version: int,
    ) -> bool:
        """One assembly (in the worker thread, or a scan's). The callers take ``changes`` only once every input
        has listed: the changes taken are always applied."""
        with self._lock:  # the worker's pass and a scan() never overlap
            changed = self._assemble(docs, changes, errors)
            self._assembled = version
            first = not self._synced
            self._synced = True
        if first:
            log.info(
                "kube.initial_sync",
                cluster=self.local_cluster,
                ready=self._snapshot is not None,
                documents=len(self._accepted) + self._assembly.items.accepted,
                lists={k: r.lists for k, r in self.reflectors.items()},
            )
        return changed or first

    def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self._snapshot)
            except Exception as exc:  # a listener's bug must not stop the source
                log.exception("kube.listener_failed", error=repr(exc))

    async def run(self) -> None:
        """Run the reflectors and re-assemble after changes until ``stop()``."""
        self._stop.clear()
        loop = self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="magw-kube")
        tasks = [asyncio.create_task(r.run(), name=f"reflector-{k}") for k, r in self.reflectors.items()]
        try:
            while not self._stop.is_set():
                await wait_first(self._stop, self._dirty)
                if self._stop.is_set():
                    break
                await asyncio.sleep(self.coalesce)  # let a burst of events land: one assembly for all of them
                self._dirty.clear()
                if not self.inputs_listed:
                    continue  # the list that completes sets dirty again
                docs = self._documents()  # on the loop: the reflectors change their dicts here
                args = (docs, self._items.take(), dict(self._errors), self._version)
                if await loop.run_in_executor(self._executor, self._pass, *args):
                    self._notify()
        finally:
            await stop_all(self.reflectors.values(), tasks)
            executor, self._executor = self._executor, None
            if executor is not None:
                executor.shutdown(wait=False)

    def stop(self) -> None:
        self._stop.set()

    async def wait_synced(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the first complete snapshot (for ``--once`` and tests)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not self._synced:
                    await asyncio.sleep(0.02)
        return self._synced
