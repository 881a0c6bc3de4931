"""Which Kubernetes resources the source lists and watches, and with which kubernetes_asyncio call.

One ``Resource`` per input: the core and discovery kinds through their typed APIs (``CoreV1Api.list_node``...),
the CRDs through ``CustomObjectsApi``. The Globalnet kinds and the workloads are read only where they are
needed: ``globalnet=False`` leaves them all out, ``workloads=False`` the workloads (the gateway daemon).
``egressgw=True`` adds the egress gateway's kinds (EgressConfig, EgressVIP, both in magw's namespace) and, unless
``workloads=False``, the workloads its bindings resolve against (Namespaces, Pods, Services, EndpointSlices),
with or without Globalnet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi, DiscoveryV1Api

from magw.sources.kube.mapping import CONFIG_MAP, SUBMARINER

GROUP = "submariner.io"
VERSION = "v1"
SUBMARINER_VERSION = "v1alpha1"
EGRESSGW_VERSION = "v1alpha1"
MCS_GROUP = "multicluster.x-k8s.io"
MCS_VERSION = "v1alpha1"

PLURALS = {
    "Cluster": "clusters",
    "Endpoint": "endpoints",
    "Gateway": "gateways",
    "ClusterGlobalEgressIP": "clusterglobalegressips",
    "GlobalEgressIP": "globalegressips",
    "GlobalIngressIP": "globalingressips",
}


CallSpec = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]  # list method, args, kwargs
Caller = Callable[[ApiClient], CallSpec]


@attrs.frozen(kw_only=True)
class Resource:
    kind: str
    call: Caller


def _custom(group: str, version: str, plural: str, namespace: str | None) -> Caller:
    def call(api: ApiClient) -> CallSpec:
        objects = CustomObjectsApi(api)
        if namespace is None:
            return objects.list_cluster_custom_object, (group, version, plural), {}
        return objects.list_namespaced_custom_object, (group, version, namespace, plural), {}

    return call


def _core(method: str, **kwargs: Any) -> Caller:
    def call(api: ApiClient) -> CallSpec:
        return getattr(CoreV1Api(api), method), (), dict(kwargs)

    return call


def _slices(api: ApiClient) -> CallSpec:
    return DiscoveryV1Api(api).list_endpoint_slice_for_all_namespaces, (), {}


def _workloads() -> list[Resource]:
    return [
        Resource(kind="Namespace", call=_core("list_namespace")),
        Resource(kind="Pod", call=_core("list_pod_for_all_namespaces")),
        Resource(kind="Service", call=_core("list_service_for_all_namespaces")),
        Resource(kind="EndpointSlice", call=_slices),
    ]


def resources(
    namespace: str, *, globalnet: bool = True, workloads: bool = True, egressgw: bool = False
) -> tuple[Resource, ...]:
    """The inputs of a cluster's snapshot: magw's own objects in ``namespace`` and Nodes; with ``globalnet`` the
    global egress kinds (the gateway publishes its block of each one's addresses); with ``workloads`` too, the
    Namespaces, Pods, Services, EndpointSlices, ServiceExports and GlobalIngressIPs of every namespace (what the
    Globalnet controller allocates for and the route agents' Globalnet rules translate; the gateway daemon
    needs none of them). With ``egressgw`` the EgressConfig and EgressVIP CRs of ``namespace``, and with
    ``workloads`` too the Namespaces, Pods, Services and EndpointSlices, Globalnet or not (the egress controller
    and the route agents resolve bindings against them; the egress agent, keepalived's, needs none)."""
    out = [
        Resource(kind="Node", call=_core("list_node")),
        Resource(kind="Cluster", call=_custom(GROUP, VERSION, "clusters", namespace)),
        Resource(kind="Endpoint", call=_custom(GROUP, VERSION, "endpoints", namespace)),
        Resource(kind="Submariner", call=_custom(GROUP, SUBMARINER_VERSION, "submariners", namespace)),
        Resource(
            kind="ConfigMap",
            call=_core("list_namespaced_config_map", namespace=namespace, field_selector=f"metadata.name={CONFIG_MAP}"),
        ),
    ]
    if globalnet:
        out += [
            Resource(kind="ClusterGlobalEgressIP", call=_custom(GROUP, VERSION, "clusterglobalegressips", namespace)),
            Resource(kind="GlobalEgressIP", call=_custom(GROUP, VERSION, "globalegressips", None)),
        ]
    if (globalnet or egressgw) and workloads:
        out += _workloads()
    if globalnet and workloads:
        out += [
            Resource(kind="ServiceExport", call=_custom(MCS_GROUP, MCS_VERSION, "serviceexports", None)),
            Resource(kind="GlobalIngressIP", call=_custom(GROUP, VERSION, "globalingressips", None)),
        ]
    if egressgw:
        out += [
            Resource(kind="EgressConfig", call=_custom(GROUP, EGRESSGW_VERSION, "egressconfigs", namespace)),
            Resource(kind="EgressVIP", call=_custom(GROUP, EGRESSGW_VERSION, "egressvips", namespace)),
        ]
    return tuple(out)


__all__ = ["EGRESSGW_VERSION", "GROUP", "MCS_GROUP", "PLURALS", "SUBMARINER", "VERSION", "Resource", "resources"]
