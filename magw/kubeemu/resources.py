"""The resource types the emulator serves, as data: one ``ResourceType`` per (group, version, plural).

The API server's behaviour differs per type in a few ways that clients can observe, and each is a field here so
that the store and the handlers stay generic:

- ``namespaced``: the URL shape (``/namespaces/<ns>/<plural>``) and whether objects carry a namespace;
- ``status``: the type has a ``/status`` subresource, so the main resource's writes leave ``.status`` alone and
  ``/status`` writes change nothing else ("Status subresource" in the API Concepts / CRD docs);
- ``builtin``: list items of built-in types carry no ``kind``/``apiVersion`` (the server's typed encoder drops
  them), custom resources' items do; built-in types accept strategic merge patches, custom resources answer 415;
- ``keep_status_on_create``: Nodes may be created with a status (the kubelet does); every other type's create
  drops it (Pods, Services, and custom resources with a status subresource);
- ``unconditional_update``: a PUT without ``metadata.resourceVersion`` is allowed for built-in types and refused
  for custom resources (``customResourceStrategy.AllowUnconditionalUpdate`` is false);
- ``field_labels``: the field selectors the type supports besides ``metadata.name``/``metadata.namespace``.

``from_crd(doc)`` builds the types of a CustomResourceDefinition manifest, so the emulator can serve whatever
``deploy/crds/*.yaml`` defines without a code change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs


@attrs.frozen
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    status: bool = False
    builtin: bool = False
    keep_status_on_create: bool = False
    unconditional_update: bool = True
    field_labels: tuple[str, ...] = ()
    # What kubectl reads (magw.kubeemu.table, magw.kubeemu.openapi, discovery): the CRD's additionalPrinterColumns
    # and openAPIV3Schema (None: columns Name and Age, no schema), and its short names.
    columns: tuple[Mapping[str, Any], ...] = attrs.field(default=(), eq=False)
    schema: Mapping[str, Any] | None = attrs.field(default=None, eq=False)
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def qualified(self) -> str:
        """How the API names the resource in messages: ``pods``, ``leases.coordination.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def prefix(self) -> str:
        """The URL prefix of the group version: ``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


def _builtin(group: str, version: str, kind: str, plural: str, namespaced: bool, **kw: Any) -> ResourceType:
    return ResourceType(group, version, kind, plural, namespaced, builtin=True, **kw)


BUILTIN: tuple[ResourceType, ...] = (
    _builtin(
        "", "v1", "Node", "nodes", False, status=True, keep_status_on_create=True, field_labels=("spec.unschedulable",),
        short_names=("no",),
    ),
    _builtin(
        "", "v1", "Namespace", "namespaces", False, status=True, field_labels=("status.phase",), short_names=("ns",)
    ),
    _builtin(
        "",
        "v1",
        "Pod",
        "pods",
        True,
        status=True,
        field_labels=(
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
        short_names=("po",),
    ),
    _builtin(
        "", "v1", "Service", "services", True, status=True, field_labels=("spec.clusterIP", "spec.type"),
        short_names=("svc",),
    ),
    _builtin("", "v1", "ConfigMap", "configmaps", True, short_names=("cm",)),
    _builtin("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    _builtin("coordination.k8s.io", "v1", "Lease", "leases", True),
)


def _custom(group: str, version: str, kind: str, plural: str, *, status: bool = True) -> ResourceType:
    return ResourceType(group, version, kind, plural, True, status=status, unconditional_update=False)


# The kinds of docs/kubernetes.md ("The objects"): what deploy/crds/*.yaml defines. Built in so that tests do not
# depend on the manifests; ``from_crd`` serves any other.
SUBMARINER: tuple[ResourceType, ...] = (
    _custom("submariner.io", "v1", "Cluster", "clusters"),
    _custom("submariner.io", "v1", "Endpoint", "endpoints"),
    _custom("submariner.io", "v1", "Gateway", "gateways"),
    _custom("submariner.io", "v1", "ClusterGlobalEgressIP", "clusterglobalegressips"),
    _custom("submariner.io", "v1", "GlobalEgressIP", "globalegressips"),
    _custom("submariner.io", "v1", "GlobalIngressIP", "globalingressips"),
    _custom("submariner.io", "v1alpha1", "Submariner", "submariners"),
    _custom("multicluster.x-k8s.io", "v1alpha1", "ServiceExport", "serviceexports"),
)

DEFAULT_TYPES: tuple[ResourceType, ...] = BUILTIN + SUBMARINER


class CrdError(ValueError):
    """A CustomResourceDefinition document the emulator cannot serve; one line."""


def from_crd(doc: Mapping[str, Any]) -> tuple[ResourceType, ...]:
    """The resource types of a CRD manifest (``apiextensions.k8s.io/v1``): one per served version."""
    if doc.get("kind") != "CustomResourceDefinition":
        raise CrdError(f"not a CustomResourceDefinition: kind {doc.get('kind')!r}")
    spec = doc.get("spec") or {}
    names = spec.get("names") or {}
    group, kind, plural = spec.get("group"), names.get("kind"), names.get("plural")
    if not (isinstance(group, str) and isinstance(kind, str) and isinstance(plural, str) and group and plural):
        raise CrdError("CRD without spec.group, spec.names.kind or spec.names.plural")
    scope = spec.get("scope", "Namespaced")
    if scope not in ("Namespaced", "Cluster"):
        raise CrdError(f"CRD {plural}.{group}: scope {scope!r} is neither Namespaced nor Cluster")
    types = []
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        types.append(
            ResourceType(
                group,
                str(version["name"]),
                kind,
                plural,
                scope == "Namespaced",
                status="status" in subresources,
                unconditional_update=False,
                columns=tuple(version.get("additionalPrinterColumns") or ()),
                schema=schema if isinstance(schema, dict) else None,
                short_names=tuple(names.get("shortNames") or ()),
            )
        )
    if not types:
        raise CrdError(f"CRD {plural}.{group} serves no version")
    return tuple(types)


class Registry:
    """The served types, found by URL parts (group, version, plural)."""

    def __init__(self, types: Iterable[ResourceType] = DEFAULT_TYPES) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        """Serve ``rt``; a type of the same (group, version, plural) is replaced (a CRD that redefines it)."""
        self._types[rt.key] = rt

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self._types.values():
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        return None

    def group_versions(self) -> dict[tuple[str, str], list[ResourceType]]:
        out: dict[tuple[str, str], list[ResourceType]] = {}
        for rt in self._types.values():
            out.setdefault((rt.group, rt.version), []).append(rt)
        return out
