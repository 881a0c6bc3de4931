"""deploy/ checked offline: the Kubernetes schemas, and CRD schemas that carry every limit magw's code enforces.

No API server runs here (docs/kubernetes.md): every manifest is validated against the official OpenAPI schemas
that kubernetes-validate ships (strict: unknown fields are errors), the CRDs get the structural checks the API
server makes on them, and every example CR is checked against its CRD by tests/support/deploy_checks.py. One bad CR
per limit shows the limit bites. RBAC: tests/deploy/test_deploy_rbac.py; workloads, image and scripts:
tests/deploy/test_deploy_workloads.py; the CEL itself: tests/deploy/test_deploy_cel.py. scripts/e2e-kind.sh runs the
same
manifests on real API servers (not here).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests.support.deploy_checks import (
    FORMATS,
    K8S_VERSION,
    TWINS,
    cr_errors,
    crds,
    find,
    manifests,
    rules,
    to_json_schema,
)

KUBE_MANIFESTS = [m for m in manifests() if "examples" not in m.path.parts]
EXAMPLES = manifests("examples")


@pytest.mark.parametrize("manifest", KUBE_MANIFESTS, ids=str)
def test_every_manifest_validates_against_the_kubernetes_schemas(manifest: Any) -> None:
    """Each document of deploy/ (examples apart) is a valid object of a kind Kubernetes knows, CRDs included."""
    assert kubernetes_validate.validate(manifest.doc, K8S_VERSION, strict=True) == "1.37"


def test_the_kubernetes_validation_refuses_a_misspelt_field() -> None:
    """Strict mode bites: a typo in a DaemonSet (containers[0].imagePullPolicyy) is an error, not ignored."""
    daemonset = copy.deepcopy(find("DaemonSet", "magw-route-agent"))
    daemonset["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError, match="imagePullPolicyy"):
        kubernetes_validate.validate(daemonset, K8S_VERSION, strict=True)


# ----- CRDs -----------------------------------------------------------------------------------------------

CRDS = manifests("crds")
SPEC_KINDS = {
    ("submariner.io/v1", "Cluster"),
    ("submariner.io/v1", "Endpoint"),
    ("submariner.io/v1", "Gateway"),
    ("submariner.io/v1", "ClusterGlobalEgressIP"),
    ("submariner.io/v1", "GlobalEgressIP"),
    ("submariner.io/v1", "GlobalIngressIP"),
    ("submariner.io/v1alpha1", "Submariner"),
    ("multicluster.x-k8s.io/v1alpha1", "ServiceExport"),
    ("submariner.io/v1alpha1", "EgressVIP"),
    ("submariner.io/v1alpha1", "EgressConfig"),
}


def test_the_crds_are_the_kinds_of_the_shared_api_one_per_file() -> None:
    """Exactly the kinds of the API table, each alone in a file named <group>_<plural>.yaml, Namespaced."""
    assert set(crds()) == SPEC_KINDS
    for crd in CRDS:
        spec = crd.doc["spec"]
        assert crd.index == 0 and crd.name == f"{spec['names']['plural']}.{spec['group']}"
        assert crd.path.name == f"{spec['group']}_{spec['names']['plural']}.yaml"
        assert spec["scope"] == "Namespaced"
        assert [v["name"] for v in spec["versions"] if v["storage"]] == [spec["versions"][0]["name"]]


def _structural_problems(schema: dict[str, Any], path: str) -> list[str]:
    """What the API server's structural-schema check would refuse (the parts our CRDs could get wrong)."""
    problems = []
    if "type" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(f"{path}: no type")
    props = schema.get("properties") or {}
    problems += [f"{path}: required {r!r} is not a property" for r in schema.get("required", ()) if r not in props]
    list_type = schema.get("x-kubernetes-list-type")
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        problems.append(f"{path}: list type {list_type!r}")
    if list_type == "map":
        item = schema["items"]
        problems += [
            f"{path}: map key {k!r} must be a required property of the items"
            for k in schema["x-kubernetes-list-map-keys"]
            if k not in item.get("required", ())
        ]
    if list_type == "set" and schema["items"].get("type") not in ("string", "integer", "number", "boolean"):
        problems.append(f"{path}: a set holds scalars")
    if "default" in schema:
        validator = jsonschema.Draft7Validator(to_json_schema(schema), format_checker=FORMATS)
        problems += [f"{path}: default {e.message}" for e in validator.iter_errors(schema["default"])]
    for rule in schema.get("x-kubernetes-validations", ()):
        if schema.get("type") == "string" and "maxLength" not in schema:
            problems.append(f"{path}: a CEL rule on a string without maxLength has no cost bound")
        if not rule.get("message"):
            problems.append(f"{path}: a CEL rule without a message")
    for name, sub in props.items():
        problems += _structural_problems(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        if schema.get("x-kubernetes-validations") is None and list(rules(schema["items"])) and "maxItems" not in schema:
            problems.append(f"{path}: CEL rules under a list without maxItems have no cost bound")
        problems += _structural_problems(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += _structural_problems(schema["additionalProperties"], f"{path}{{}}")
    return problems


@pytest.mark.parametrize("crd", CRDS, ids=str)
def test_every_crd_is_structural_with_status_subresource_and_columns(crd: Any) -> None:
    """Types everywhere, required fields that exist, defaults their schema admits, bounded CEL, map keys
    required, status subresource, printer columns of a known type, and metadata not restricted."""
    for version in crd.doc["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert _structural_problems(schema, "") == []
        assert schema["properties"]["metadata"] == {"type": "object"}
        assert version["subresources"] == {"status": {}}
        columns = version["additionalPrinterColumns"]
        assert {c["type"] for c in columns} <= {"integer", "number", "string", "boolean", "date"}
        assert all(c["jsonPath"].startswith(".") for c in columns)


def test_every_cel_rule_has_its_python_twin() -> None:
    """A CEL rule the tests cannot evaluate would be an unchecked limit: each one has a twin in TWINS."""
    used = {r["rule"] for schema in crds().values() for r in rules(schema)}
    assert used == set(TWINS)


def test_shared_blocks_are_identical_in_every_crd() -> None:
    """Every CIDR item, every IPv4 address and every conditions list is the same schema in every CRD."""
    seen: dict[str, list[str]] = {"cidr": [], "ipv4": [], "conditions": []}

    def walk(schema: dict[str, Any], name: str) -> None:
        if schema.get("format") in ("cidr", "ipv4"):
            seen[schema["format"]].append(repr({k: v for k, v in schema.items() if k != "description"}))
        if name == "conditions":
            seen["conditions"].append(repr(schema))
        for key, sub in (schema.get("properties") or {}).items():
            walk(sub, key)
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], "")

    for schema in crds().values():
        walk(schema, "")
    assert {kind: len(set(found)) for kind, found in seen.items()} == {"cidr": 1, "ipv4": 1, "conditions": 1}


# ----- example CRs and the limits they bite on -------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_every_example_is_admitted_by_its_crd(example: Any) -> None:
    assert cr_errors(example.doc) == []


def test_there_is_an_example_of_every_kind() -> None:
    assert {(m.doc["apiVersion"], m.kind) for m in EXAMPLES} == SPEC_KINDS


def _example(kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(m.doc for m in EXAMPLES if m.kind == kind))


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation: set (or with value ``...``, delete) the field at dotted ``path`` (``a.b[0].c``)."""

    def mutate(doc: dict[str, Any]) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in re.split(r"\.|\[|\]\.?", path) if k]
        target = doc
        for key in keys[:-1]:
            target = target[key]
        if value is ...:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return mutate


# (kind, mutation, a part of the expected error): each limit of magw's code, refused by the CRD.
BAD = [
    ("ClusterGlobalEgressIP", "spec.numberOfIPs", 21, "21 is greater than the maximum of 20"),
    ("ClusterGlobalEgressIP", "spec.numberOfIPs", -1, "-1 is less than the minimum of 0"),
    ("GlobalEgressIP", "spec.numberOfIPs", 21, "greater than the maximum"),
    ("GlobalEgressIP", "spec.numberOfIPs", "2", "'2' is not of type 'integer'"),
    ("GlobalEgressIP", "spec.podSelector.matchExpressions[0].operator", "Like", "'Like' is not one of"),
    ("GlobalEgressIP", "spec.podSelector.matchExpressions[0].values", [], "need at least one value"),
    ("GlobalEgressIP", "spec.podSelector.matchExpressions[0].key", "-bad", "does not match"),
    ("GlobalEgressIP", "spec.podSelector.matchLabels.app", "a b", "does not match"),
    ("GlobalEgressIP", "spec.podSelector.selector", {}, "Additional properties"),
    ("GlobalIngressIP", "spec.target", "NodePort", "'NodePort' is not one of"),
    ("GlobalIngressIP", "spec.serviceName", ..., "'serviceName' is a required property"),
    ("GlobalIngressIP", "spec.serviceName", "Web", "does not match"),
    ("GlobalIngressIP", "spec.targetIP", "10.0.0.1/32", "is not a 'ipv4'"),
    ("GlobalIngressIP", "status.allocatedIP", "1.2.3", "does not match"),
    ("Endpoint", "spec.private_ip", "10.0.0.256", "does not match"),
    ("Endpoint", "spec.private_ip", "010.0.0.1", "does not match"),
    ("Endpoint", "spec.private_ip", ..., "'private_ip' is a required property"),
    ("Endpoint", "spec.public_ip", "example.com", "does not match"),
    ("Endpoint", "spec.hostname", "", "should be non-empty"),
    ("Endpoint", "spec.hostname", "-gw1", "does not match"),
    ("Endpoint", "spec.cluster_id", "East", "does not match"),
    ("Endpoint", "spec.backend", "libreswan", "'libreswan' is not one of"),
    ("Endpoint", "spec.backend_config", {"publicKey": "not-a-key"}, "does not match"),
    ("Endpoint", "spec.subnets", ["10.1.0.0/16", "10.1.0.0/16"], "non-unique elements"),
    ("Endpoint", "spec.allocated_ips", ["242.0.0.1", "242.0.0"], "does not match"),
    ("Cluster", "spec.cluster_cidr", [], "should be non-empty"),
    ("Cluster", "spec.cluster_cidr", ["10.1.0.1/16"], "no host bits set"),
    ("Cluster", "spec.service_cidr", ["100.1.0.0/33"], "does not match"),
    ("Cluster", "spec.service_cidr", ["100.1.0.0"], "does not match"),
    ("Cluster", "spec.cluster_id", "a" * 64, "is too long"),
    ("Cluster", "spec.clusterCIDR", ["10.1.0.0/16"], "Additional properties"),
    ("Gateway", "status.haStatus", "standby", "'standby' is not one of"),
    ("Gateway", "status.connections[0].status", "up", "'up' is not one of"),
    ("Gateway", "status.connections[0].latencyRTT.last", "12", "does not match"),
    ("Gateway", "status.conditions[0].status", "Yes", "'Yes' is not one of"),
    ("Gateway", "status.conditions[0].lastTransitionTime", "yesterday", "is not a 'date-time'"),
    ("Gateway", "status.conditions[0].reason", "not camel case", "does not match"),
    (
        "Gateway",
        "status.conditions[1]",
        {"type": "Ready", "status": "True", "reason": "Again", "lastTransitionTime": "2025-01-01T00:00:00Z"},
        "duplicate entries",
    ),
    ("Submariner", "metadata.name", "other", "only the Submariner object named submariner"),
    ("Submariner", "spec.multiActiveGatewayEnabled", "yes", "is not of type 'boolean'"),
    ("EgressVIP", "spec.vip", "192.0.2.300", "does not match"),
    ("EgressVIP", "spec.vrid", 0, "0 is less than the minimum of 1"),
    ("EgressVIP", "spec.vrid", 256, "256 is greater than the maximum of 255"),
    ("EgressVIP", "spec.candidates", [], "should be non-empty"),
    ("EgressVIP", "spec.candidates", ["e-gw1", "e-gw1"], "non-unique elements"),
    ("EgressVIP", "spec.candidates", ..., "'candidates' is a required property"),
    ("EgressVIP", "spec.bindings[1]", {"namespace": "shop"}, "a binding is listed twice"),
    ("EgressVIP", "spec.bindings[0].namespace", "Shop", "does not match"),
    ("EgressVIP", "spec.bindings[0].svc", "web", "Additional properties"),
    ("EgressVIP", "spec.advertInt", 1, "Additional properties"),
    ("EgressVIP", "status.since", "yesterday", "is not a 'date-time'"),
    ("EgressVIP", "status.services", ["web"], "does not match"),
    ("EgressConfig", "metadata.name", "other", "only the EgressConfig named default"),
    ("EgressConfig", "spec.vipRanges", ["192.0.2.1/24"], "no host bits set"),
    ("EgressConfig", "spec.vipRanges", ["192.0.2.0"], "does not match"),
    ("EgressConfig", "spec.vipRanges", ["192.0.2.0/24", "192.0.2.0/24"], "non-unique elements"),
    ("EgressConfig", "spec.advertInt", 0.001, "less than the minimum of 0.01"),
    ("EgressConfig", "spec.advertInt", 41, "greater than the maximum of 40.95"),
    ("EgressConfig", "spec.conntrackSync", "yes", "is not of type 'boolean'"),
    ("EgressConfig", "spec.advert_int", 1, "Additional properties"),
]


@pytest.mark.parametrize(("kind", "path", "value", "expected"), BAD, ids=[f"{b[0]}:{b[1]}={b[2]!r}"[:80] for b in BAD])
def test_each_limit_refuses_a_bad_cr(kind: str, path: str, value: Any, expected: str) -> None:
    """The example of ``kind`` is admitted; with one field made bad it is refused, for that field's reason."""
    doc = _example(kind)
    if path.startswith("status.conditions[1]"):
        doc["status"]["conditions"].append(copy.deepcopy(doc["status"]["conditions"][0]))
    _set(path, value)(doc)
    errors = cr_errors(doc)
    assert any(expected in e for e in errors), errors


def test_a_selector_operator_without_values_is_refused_but_exists_with_none_is_admitted() -> None:
    """The CEL rule on matchExpressions both ways: Exists takes no values, In needs some."""
    doc = _example("GlobalEgressIP")
    doc["spec"]["podSelector"]["matchExpressions"] = [{"key": "tier", "operator": "Exists"}]
    assert cr_errors(doc) == []
    doc["spec"]["podSelector"]["matchExpressions"][0]["values"] = ["x"]
    assert cr_errors(doc) == [".spec.podSelector.matchExpressions[0]: " + _operator_message()]


def _operator_message() -> str:
    return "In and NotIn need at least one value; Exists and DoesNotExist take none"
