"""Does deploy/rbac allow a request? The RBAC rules of the manifests, evaluated as the API server's authorizer
does (verbs, API groups, resources and subresources, resourceNames, Role namespace), for the requests the
emulator logged (``Emulator.faults.log``: method and path with query)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
import yaml

from tests.support.paths import DEPLOY

RBAC = DEPLOY


@attrs.frozen
class Request:
    verb: str
    group: str
    resource: str  # "leases", "gateways/status"
    namespace: str  # "" for cluster-scoped resources and all-namespace lists
    name: str

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource} {self.name}{where}".replace("  ", " ")


def request_of(method: str, path_qs: str) -> Request | None:
    """The authorizer's view of one request; None for discovery and other non-resource paths."""
    url = urlsplit(path_qs)
    parts = [p for p in url.path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    elif len(rest) == 2 and rest[0] == "namespaces" and method == "GET":
        return Request("get", "", "namespaces", "", rest[1])
    if not rest:
        return None
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    query = {k.lower(): v[0].lower() for k, v in parse_qs(url.query).items()}
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        verb = "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list")
    return Request(verb, group, resource, namespace, name)


def _docs() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(RBAC.rglob("*.yaml")):
        if path.is_relative_to(RBAC / "helm") or path.is_relative_to(RBAC / "kustomize"):
            continue  # the chart and the overlays: tests/deploy/test_helm_features.py, test_kustomize.py
        out += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return out


# Built-in ClusterRoles the manifests bind (as every cluster defines them; not in deploy/).
BUILTIN_ROLES: dict[tuple[str, str, str], dict[str, Any]] = {
    ("ClusterRole", "", "system:auth-delegator"): {
        "rules": [
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        ]
    },
}


def rules_of(service_account: str, namespace: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(namespace the rule applies in, "" for everywhere; rule) for every role bound to the ServiceAccount."""
    docs = _docs()
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}
    roles.update(BUILTIN_ROLES)
    out: list[tuple[str, Mapping[str, Any]]] = []
    for binding in docs:
        if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = binding.get("subjects") or []
        if not any(s.get("kind") == "ServiceAccount" and s["name"] == service_account
                   and s.get("namespace") == namespace for s in subjects):  # fmt: skip
            continue
        ref = binding["roleRef"]
        bound_ns = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
        role_ns = bound_ns if ref["kind"] == "Role" else ""
        role = roles[(ref["kind"], role_ns, ref["name"])]
        out += [(bound_ns, rule) for rule in role.get("rules") or []]
    return out


def allowed(rules: Iterable[tuple[str, Mapping[str, Any]]], req: Request) -> bool:
    for scope, rule in rules:
        if scope and scope != req.namespace:
            continue
        if req.group not in rule.get("apiGroups", []) or req.resource not in rule.get("resources", []):
            continue
        if req.verb not in rule.get("verbs", []):
            continue
        names = rule.get("resourceNames")
        if names and req.name not in names:
            continue
        return True
    return False
