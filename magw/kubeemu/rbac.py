"""Authentication and authorization for the emulator: TokenReview and SubjectAccessReview (docs/kubeemu.md).

- A static token file in kube-apiserver's ``--token-auth-file`` format: one ``token,user,uid,"group1,group2"``
  per line (the groups column optional; ``#`` lines and blank lines skipped). ``POST
  /apis/authentication.k8s.io/v1/tokenreviews`` answers ``status.authenticated`` and ``status.user`` for a
  token of the file (every authenticated user also gets ``system:authenticated``; a user named
  ``system:serviceaccount:NS:NAME`` also ``system:serviceaccounts`` and ``system:serviceaccounts:NS``).
- ``POST /apis/authorization.k8s.io/v1/subjectaccessreviews`` evaluates ``spec.resourceAttributes`` for
  ``spec.user``/``spec.groups`` over the RBAC objects the store holds (Role, ClusterRole, RoleBinding,
  ClusterRoleBinding, rbac.authorization.k8s.io/v1): a ClusterRoleBinding grants its ClusterRole everywhere, a
  RoleBinding grants its Role or ClusterRole in its namespace; a rule matches when its apiGroups, resources,
  verbs (``*`` for any) and resourceNames (empty: any) do. Allow-only, as RBAC is; no aggregation rules, no
  nonResourceURLs, no subresources beyond ``resource/subresource`` in a rule.

The emulator does not authenticate its own clients: these two endpoints are for a component (magw-egress) that
delegates its own authentication and authorization to the API server, as kube-rbac-proxy does.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from magw.kubeemu.resources import ResourceType

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC: tuple[ResourceType, ...] = (
    ResourceType(RBAC_GROUP, "v1", "Role", "roles", True, builtin=True),
    ResourceType(RBAC_GROUP, "v1", "ClusterRole", "clusterroles", False, builtin=True),
    ResourceType(RBAC_GROUP, "v1", "RoleBinding", "rolebindings", True, builtin=True),
    ResourceType(RBAC_GROUP, "v1", "ClusterRoleBinding", "clusterrolebindings", False, builtin=True),
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, builtin=True),
)
_ROLE, _CLUSTER_ROLE, _ROLE_BINDING, _CLUSTER_ROLE_BINDING = RBAC[:4]
SA_PREFIX = "system:serviceaccount:"


class TokenFileError(ValueError):
    """A token file line the emulator cannot read; one line."""


@attrs.frozen
class UserInfo:
    username: str
    uid: str
    groups: tuple[str, ...]

    def doc(self) -> dict[str, Any]:
        return {"username": self.username, "uid": self.uid, "groups": list(self.groups)}


def implied_groups(username: str, groups: Iterable[str]) -> tuple[str, ...]:
    """The groups a real API server adds: system:authenticated, and a ServiceAccount's two groups."""
    out = list(groups)
    extra = ["system:authenticated"]
    if username.startswith(SA_PREFIX) and username.count(":") == 3:
        extra += ["system:serviceaccounts", f"system:serviceaccounts:{username.split(':')[2]}"]
    return tuple(out + [g for g in extra if g not in out])


def parse_token_file(text: str) -> dict[str, UserInfo]:
    """kube-apiserver's ``--token-auth-file``: ``token,user,uid[,"g1,g2"]`` per line."""
    tokens: dict[str, UserInfo] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 3 or not row[0] or not row[1]:
            raise TokenFileError(f"token file line {number}: expected token,user,uid[,groups]")
        groups = [g.strip() for g in row[3].split(",") if g.strip()] if len(row) > 3 else []
        tokens[row[0]] = UserInfo(row[1], row[2], implied_groups(row[1], groups))
    return tokens


def _matches(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def _rule_allows(rule: Mapping[str, Any], attrs_: Mapping[str, Any]) -> bool:
    resource = str(attrs_.get("resource", ""))
    if attrs_.get("subresource"):
        resource = f"{resource}/{attrs_['subresource']}"
    names = rule.get("resourceNames") or []
    return (
        _matches(rule.get("apiGroups"), str(attrs_.get("group", "")))
        and _matches(rule.get("resources"), resource)
        and _matches(rule.get("verbs"), str(attrs_.get("verb", "")))
        and (not names or str(attrs_.get("name", "")) in names)
    )


def _subject_matches(subject: Mapping[str, Any], user: str, groups: tuple[str, ...], namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        return user == f"{SA_PREFIX}{subject.get('namespace') or namespace}:{name}"
    return False


class Authorizer:
    """RBAC over the objects of a store-like reader: ``objects(rt)`` gives ``{(namespace, name): obj}``."""

    def __init__(self, objects: Any) -> None:
        self._objects = objects

    def _rules(self, rt: ResourceType, namespace: str, name: str) -> list[Mapping[str, Any]]:
        role = self._objects(rt).get((namespace, name))
        return list((role or {}).get("rules") or [])

    def allowed(self, user: str, groups: Iterable[str], attrs_: Mapping[str, Any]) -> tuple[bool, str]:
        groups_ = tuple(groups)
        namespace = str(attrs_.get("namespace", ""))
        bindings: list[tuple[Mapping[str, Any], str]] = [
            (b, "") for b in self._objects(_CLUSTER_ROLE_BINDING).values()
        ]
        if namespace:
            bindings += [(b, namespace) for (ns, _), b in self._objects(_ROLE_BINDING).items() if ns == namespace]
        for binding, ns in bindings:
            if not any(_subject_matches(s, user, groups_, ns) for s in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole":
                rules = self._rules(_CLUSTER_ROLE, "", str(ref.get("name", "")))
            elif ref.get("kind") == "Role" and ns:
                rules = self._rules(_ROLE, ns, str(ref.get("name", "")))
            else:
                continue
            if any(_rule_allows(rule, attrs_) for rule in rules):
                kind = "RoleBinding" if ns else "ClusterRoleBinding"
                return True, f'RBAC: allowed by {kind} "{binding.get("metadata", {}).get("name", "")}"'
        return False, ""


def token_review(tokens: Mapping[str, UserInfo], body: Mapping[str, Any]) -> dict[str, Any]:
    token = str((body.get("spec") or {}).get("token", ""))
    user = tokens.get(token) if token else None
    status: dict[str, Any] = {"authenticated": user is not None}
    if user is not None:
        status["user"] = user.doc()
    else:
        status["error"] = "invalid bearer token"
    return _review("authentication.k8s.io/v1", "TokenReview", body, status)


def subject_access_review(authorizer: Authorizer, body: Mapping[str, Any]) -> dict[str, Any]:
    spec = body.get("spec") or {}
    user = str(spec.get("user", ""))
    groups = tuple(str(g) for g in spec.get("groups") or [])
    attrs_ = spec.get("resourceAttributes") or {}
    allowed, reason = authorizer.allowed(user, groups, attrs_) if attrs_ else (False, "")
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return _review("authorization.k8s.io/v1", "SubjectAccessReview", body, status)


def _review(api_version: str, kind: str, body: Mapping[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"creationTimestamp": None},
        "spec": dict(body.get("spec") or {}),
        "status": status,
    }
