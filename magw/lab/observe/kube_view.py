"""What a kube lab's emulators hold, read the way the daemons read it: for ``up``'s wait, ``status`` and the demos.

A cluster's snapshot is built from one list of every input the Kubernetes source watches (the same kinds, in
the same namespaces), each object mapped by ``magw.sources.kube.mapping`` and the documents assembled by
``magw.sources.file.assemble``, exactly as ``KubeSource`` does; only the transport differs (one synchronous list
per kind, no watch: ``magw.lab.planes.kube_http``). So the lab sees the Globalnet allocations the route agents see.
Objects that cannot be mapped yet (a Node before its route agent wrote the CNI annotation) are left out, as the
source leaves them out. An emulator that does not answer reads as empty: callers poll, and ``status`` shows
what it can.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from magw.lab.build.state import LabState
from magw.lab.observe.globalview import ClusterView, cluster_view
from magw.lab.planes.kube import ApiServer, api_servers, cluster_api
from magw.lab.planes.kube_http import KubeHttp, KubeHttpError
from magw.lab.spec.layout import LabLayout
from magw.model import Snapshot
from magw.model.globalnet import Globalnet
from magw.sources.file.assemble import assemble
from magw.sources.file.documents import Document
from magw.sources.kube import mapping

Obj = Mapping[str, Any]
# kind -> listed in magw's namespace (True) or across the cluster (False): ``magw.sources.kube.resources``.
_INPUTS = {"Node": False, "Cluster": True, "Endpoint": True, "Submariner": True, "ConfigMap": True}
_GLOBALNET_INPUTS = {
    "Namespace": False, "Pod": False, "Service": False, "EndpointSlice": False, "ServiceExport": False,
    "ClusterGlobalEgressIP": True, "GlobalEgressIP": False, "GlobalIngressIP": False,
}  # fmt: skip
_GLOBALNET_KINDS = ("ClusterGlobalEgressIP", "GlobalEgressIP", "GlobalIngressIP")
_EGRESS_INPUTS = {"EgressConfig": True, "EgressVIP": True}  # the egress cluster's route agents run with --egress


def _list_inputs(http: KubeHttp, namespace: str, globalnet: bool, egress: bool) -> dict[str, list[dict[str, Any]]]:
    inputs = {**_INPUTS, **(_GLOBALNET_INPUTS if globalnet or egress else {}), **(_EGRESS_INPUTS if egress else {})}
    return {kind: http.list(kind, namespace if local else None) for kind, local in inputs.items()}


def _slices_of(service: Obj, slices: Iterable[Obj]) -> list[Obj]:
    meta = service.get("metadata") or {}
    return [
        s
        for s in slices
        if (s.get("metadata") or {}).get("namespace") == meta.get("namespace")
        and ((s.get("metadata") or {}).get("labels") or {}).get(mapping.SERVICE_NAME_LABEL) == meta.get("name")
    ]


def documents(cluster: str, namespace: str, objects: Mapping[str, list[dict[str, Any]]]) -> list[Document]:
    """The documents of ``cluster``'s objects (``KubeSource._map`` and ``_documents``), the egress gateway's kinds
    included; unmappable ones left out."""
    maps: dict[str, Callable[[Obj], tuple[Document, ...]]] = {
        "Node": lambda o: mapping.node_docs(o, cluster),
        "Cluster": mapping.cluster_docs,
        "Endpoint": mapping.endpoint_docs,
        "Namespace": lambda o: mapping.namespace_docs(o, cluster),
        "Pod": lambda o: mapping.pod_docs(o, cluster),
        "Service": lambda o: mapping.service_docs(o, cluster, _slices_of(o, objects.get("EndpointSlice", ()))),
        "ServiceExport": lambda o: mapping.service_export_docs(o, cluster),
    }
    for kind in _GLOBALNET_KINDS:
        maps[kind] = functools.partial(_globalnet_docs, kind, cluster)
    maps["EgressVIP"] = lambda o: mapping.egress_vip_docs(o, cluster)
    maps["EgressConfig"] = lambda o: mapping.egress_config_docs(o, cluster)
    docs: list[Document] = []
    for kind, fn in maps.items():
        for obj in objects.get(kind, ()):
            try:
                docs.extend(fn(obj))
            except mapping.MappingError:
                continue
    submariner = _named(objects.get("Submariner", ()), namespace, mapping.SUBMARINER)
    config_map = _named(objects.get("ConfigMap", ()), namespace, mapping.CONFIG_MAP)
    with contextlib.suppress(mapping.MappingError):  # the source keeps the last good Config; here: none
        docs.extend(mapping.config_docs(submariner, config_map))
    return docs


def _globalnet_docs(kind: str, cluster: str, obj: Obj) -> tuple[Document, ...]:
    return mapping.globalnet_docs(kind, obj, cluster)


def _named(objs: Iterable[Obj], namespace: str, name: str) -> Obj | None:
    for obj in objs:
        meta = obj.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) == (namespace, name):
            return obj
    return None


def cluster_snapshot(st: LabState, cluster: str) -> Snapshot | None:
    """``cluster``'s snapshot as its daemons see it; None while it is incomplete or its emulator is away."""
    api = cluster_api(st, cluster)
    egress = st.topology.egressgw is not None and st.topology.egressgw.cluster == cluster
    try:
        objects = _list_inputs(api.http(), api.namespace, st.topology.globalnet, egress)
    except KubeHttpError:
        return None
    return assemble(cluster, documents(cluster, api.namespace, objects), {}).snapshot


def globalnets(lab: LabLayout, st: LabState) -> dict[str, Globalnet]:
    """Cluster id -> its Globalnet objects and statuses (empty while its snapshot is incomplete)."""
    out = {}
    for c in lab.clusters:
        snap = cluster_snapshot(st, c.id)
        out[c.id] = snap.globalnet if snap is not None else Globalnet()
    return out


class KubeViewReader:
    """``globalview.Reader`` for a kube lab: every cluster's view, read again at each ``read()``."""

    def __init__(self, lab: LabLayout, st: LabState) -> None:
        self._lab, self._st = lab, st

    def read(self) -> dict[str, ClusterView]:
        gns = globalnets(self._lab, self._st)
        return {c.id: cluster_view(c.id, gns[c.id], tuple(g.name for g in c.gateways)) for c in self._lab.clusters}


def objects_of(api: ApiServer, kind: str) -> dict[str, dict[str, Any]]:
    """Name -> object of ``kind`` in magw's namespace of ``api``; empty when it does not answer."""
    try:
        return {o["metadata"]["name"]: o for o in api.http(timeout=2.0).list(kind, api.namespace)}
    except KubeHttpError:
        return {}


def endpoints_everywhere(st: LabState) -> dict[str, set[str]]:
    """Emulator name (cluster id, or "broker") -> the names of the Endpoints it holds."""
    return {api.name: set(objects_of(api, "Endpoint")) for api in api_servers(st)}
