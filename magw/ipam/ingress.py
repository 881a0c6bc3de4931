"""The GlobalIngressIP objects the controller must make for exported services (docs/globalnet.md), pure.

- an exported ClusterIP Service: one, ``svc-<service>``, target ``ClusterIPService``, ``target_ip`` its ClusterIP;
- an exported headless Service with a selector: one per backend pod, ``pod-<pod>``, target
  ``HeadlessServicePod``. Backends are the namespace's pods that the selector matches, that have an IP and
  are not host-network, and that are Running (or, for a service with ``publish_not_ready``, in any phase but
  Succeeded or Failed). A pod that backs two exported headless services gets one object; its
  ``service_name`` is the first service by name;
- an exported headless Service without a selector: one per endpoint address,
  ``ep-<service>-<address with dots as dashes>``, target ``HeadlessServiceEndpoints``.

Objects live in the service's namespace, so the same service name in two namespaces gives two distinct
sets of objects and nothing of one namespace is ever derived from (or deleted for) the other. Names longer
than 63 characters are cut to 54, then ``-`` and 8 hex digits of the SHA-256 of the full name; the
``target_ref`` always holds the full reference.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from magw.model.globalnet import (
    POD,
    SERVICE,
    GlobalIngressIP,
    Globalnet,
    ObjectRef,
    Pod,
    PodPhase,
    Service,
    TargetType,
)

MAX_NAME = 63
_CUT = 54


def object_name(full: str) -> str:
    """``full`` if it fits Kubernetes' 63 characters, else a cut name with a hash of the full one."""
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[:_CUT].rstrip('-.')}-{digest}"


def _is_backend(pod: Pod, service: Service) -> bool:
    if pod.ip is None or pod.host_network or pod.namespace != service.namespace or service.selector is None:
        return False
    labels = pod.label_map
    if any(labels.get(k) != v for k, v in service.selector):
        return False
    if service.publish_not_ready:
        return pod.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED)
    return pod.phase is PodPhase.RUNNING


def exported_services(globalnet: Globalnet) -> tuple[Service, ...]:
    exports = {(e.namespace, e.name) for e in globalnet.service_exports}
    return tuple(s for s in globalnet.services if (s.namespace, s.name) in exports)


def wanted_ingress_ips(globalnet: Globalnet) -> tuple[GlobalIngressIP, ...]:
    """Every GlobalIngressIP the exported services need, sorted by (namespace, name)."""
    out: dict[tuple[str, str], GlobalIngressIP] = {}
    pods_by_ns: dict[str, list[Pod]] = {}
    for pod in globalnet.pods:
        pods_by_ns.setdefault(pod.namespace, []).append(pod)
    for service in exported_services(globalnet):  # sorted by (namespace, name): the first service wins a pod
        for obj in _for_service(service, pods_by_ns.get(service.namespace, ())):
            out.setdefault((obj.namespace, obj.name), obj)
    return tuple(out[key] for key in sorted(out))


def _for_service(service: Service, pods: Iterable[Pod]) -> list[GlobalIngressIP]:
    svc_ref = ObjectRef(SERVICE, service.namespace, service.name)
    if not service.headless:
        return [
            GlobalIngressIP(
                namespace=service.namespace,
                name=object_name(f"svc-{service.name}"),
                target=TargetType.CLUSTER_IP_SERVICE,
                service_name=service.name,
                target_ref=svc_ref,
                target_ip=service.cluster_ip,
            )
        ]
    if service.selector is None:
        return [
            GlobalIngressIP(
                namespace=service.namespace,
                name=object_name(f"ep-{service.name}-{str(address).replace('.', '-')}"),
                target=TargetType.HEADLESS_SERVICE_ENDPOINTS,
                service_name=service.name,
                target_ref=svc_ref,
                target_ip=address,
            )
            for address in service.endpoint_addresses
        ]
    return [
        GlobalIngressIP(
            namespace=service.namespace,
            name=object_name(f"pod-{pod.name}"),
            target=TargetType.HEADLESS_SERVICE_POD,
            service_name=service.name,
            target_ref=ObjectRef(POD, pod.namespace, pod.name),
            target_ip=pod.ip,
        )
        for pod in pods
        if _is_backend(pod, service)
    ]
