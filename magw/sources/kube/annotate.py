"""Each route agent finds its node's CNI interface address and publishes it as the Node annotation
``submariner.io/cniIfaceIp``; every agent reads the other nodes' addresses from there (docs/kubernetes.md).

The address is found locally: the first IPv4 address of this network namespace inside the local cluster's
pod CIDRs (the CNI bridge or interface the node routes its pods through), or the first IPv4 address of
``--cni-interface`` when it is given. The Node is changed by a merge patch of that one annotation (the RBAC
and the admission policy in ``deploy/rbac`` let a route agent patch nothing else, and only its own Node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address, IPv4Network
from typing import Any

from kubernetes_asyncio.client import ApiClient, CoreV1Api

from magw.sources.kube.mapping import CNI_IP_ANNOTATION
from magw.sources.kube.status import MERGE_PATCH


def pick_cni_ip(
    addresses: Iterable[tuple[str, IPv4Address]], pod_cidrs: Iterable[IPv4Network], interface: str | None
) -> IPv4Address | None:
    """From (interface, address) pairs: the first address of ``interface``, or else the first inside a pod CIDR
    (sorted, so the answer does not depend on the kernel's listing order)."""
    pairs = sorted(addresses, key=lambda p: (p[0], p[1]))
    if interface is not None:
        return next((a for name, a in pairs if name == interface), None)
    cidrs = list(pod_cidrs)
    return next((a for _, a in pairs if any(a in c for c in cidrs)), None)


def annotation_of(node: Mapping[str, Any] | None) -> str | None:
    if node is None:
        return None
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(CNI_IP_ANNOTATION)
    return str(value) if value else None


async def publish_cni_ip(api: ApiClient, node: str, address: IPv4Address) -> None:
    """Merge-patch this Node's ``submariner.io/cniIfaceIp`` annotation (nothing else)."""
    body = {"metadata": {"annotations": {CNI_IP_ANNOTATION: str(address)}}}
    core: Any = CoreV1Api(api)  # Any: the stub omits _content_type, which the generated code takes
    await core.patch_node(node, body, _content_type=MERGE_PATCH)
