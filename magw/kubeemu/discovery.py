"""Discovery documents (``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>``).

Typed clients do not need them; ``kubectl`` and kubernetes-asyncio's dynamic client read them to learn which
resources exist. Only what those read is filled in: names, kinds, scope and verbs of the served types.
"""

from __future__ import annotations

from typing import Any

from magw.kubeemu.resources import Registry, ResourceType

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _resources(types: list[ResourceType]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rt in sorted(types, key=lambda t: t.plural):
        out.append(
            {
                "name": rt.plural,
                "singularName": rt.kind.lower(),
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": VERBS,
                **({"shortNames": list(rt.short_names)} if rt.short_names else {}),
            }
        )
        if rt.status:
            out.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return out


def discovery(registry: Registry, parts: list[str]) -> dict[str, Any] | None:
    """The discovery document of a GET path split in parts, or None when the path is not a discovery path."""
    gvs = registry.group_versions()
    if parts == ["version"]:
        return {"major": "1", "minor": "31", "gitVersion": "v1.31.0-magw-kubeemu", "platform": "linux/amd64"}
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": sorted({v for g, v in gvs if not g}),
            "serverAddressByClientCIDRs": [],
        }
    if parts == ["apis"]:
        groups: dict[str, list[str]] = {}
        for g, v in sorted(gvs):
            if g:
                groups.setdefault(g, []).append(v)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[-1]}", "version": vs[-1]},
                }
                for g, vs in groups.items()
            ],
        }
    if len(parts) == 2 and parts[0] == "api" and ("", parts[1]) in gvs:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": parts[1],
            "resources": _resources(gvs[("", parts[1])]),
        }
    if len(parts) == 3 and parts[0] == "apis" and (parts[1], parts[2]) in gvs:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{parts[1]}/{parts[2]}",
            "resources": _resources(gvs[(parts[1], parts[2])]),
        }
    return None
