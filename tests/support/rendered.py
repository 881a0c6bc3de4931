"""deploy/'s objects keyed by (kind, namespace, name), to compare a rendering (the Helm chart, a kustomize
overlay) with the plain manifests object by object (tests/deploy/test_helm_render.py, test_kustomize.py)."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.deploy_checks import DEPLOY, manifests

Key = tuple[str, str, str]


def _key(doc: dict[str, Any]) -> Key:
    return (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])


def by_key(docs: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    out = {_key(d): d for d in docs}
    assert len(out) == len(docs), "two rendered objects with the same kind, namespace and name"
    return out


def _egress_part(rel: tuple[str, ...], doc: dict[str, Any]) -> str:
    """ "workload" (egress.yaml, its NetworkPolicy), "rbac" (rbac/egress.yaml, the egress ServiceAccounts) or ""."""
    if rel[-1] in ("egress.yaml", "egress-api-networkpolicy.yaml") and len(rel) == 1:
        return "workload"
    sa = doc["kind"] == "ServiceAccount" and doc["metadata"]["name"].startswith("magw-egress")
    return "rbac" if rel == ("rbac", "egress.yaml") or sa else ""


def deploy_objects(egress: bool, egress_rbac: bool | None = None) -> dict[Key, dict[str, Any]]:
    """deploy/'s objects for a member cluster (no broker/, no examples/); the egress gateway's workloads with
    ``egress``, its RBAC and ServiceAccounts with ``egress_rbac`` (default: as ``egress``)."""
    rbac = egress if egress_rbac is None else egress_rbac
    docs = []
    for m in manifests():
        rel = m.path.relative_to(DEPLOY).parts
        if rel[0] in ("examples", "broker"):
            continue
        part = _egress_part(rel, m.doc)
        if (part == "workload" and not egress) or (part == "rbac" and not rbac):
            continue
        docs.append(copy.deepcopy(m.doc))
    return by_key(docs)


def json_patch(doc: dict[str, Any], patch: list[dict[str, Any]]) -> None:
    """The two operations egress-route-agent.patch.json uses (test, add), as RFC 6902 defines them."""
    for op in patch:
        *parents, last = [p for p in op["path"].split("/")[1:]]
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if op["op"] == "test":
            assert (node[int(last)] if isinstance(node, list) else node[last]) == op["value"], op
        elif op["op"] == "add" and isinstance(node, list):
            node.insert(len(node) if last == "-" else int(last), op["value"])
        else:
            raise AssertionError(f"unexpected patch operation {op}")


def assert_same(rendered: dict[Key, dict[str, Any]], expected: dict[Key, dict[str, Any]]) -> None:
    assert sorted(rendered) == sorted(expected)
    for key, doc in expected.items():
        assert rendered[key] == doc, key
