"""Helpers of tests/deploy/test_deploy_manifests.py: read deploy/, check a custom resource against its CRD offline.

No API server can run here, so a CR is checked the way the API server would check it, in three parts:

- null fields pruned as the API server prunes them (``pruned``), then
  the CRD's structural schema turned into JSON Schema (``to_json_schema``): the ``x-kubernetes-*`` keys are
  dropped, except ``x-kubernetes-list-type: set`` (-> ``uniqueItems``) and ``map`` (keys checked by
  ``rule_errors``); objects with ``properties`` refuse unknown fields, as the API server does for ``kubectl
  apply`` (field validation Strict); formats ``ipv4``, ``cidr`` and ``date-time`` are checked by ``FORMATS``;
- the CRDs' CEL rules (``x-kubernetes-validations``) by their Python twins (``TWINS``, keyed by the exact
  rule text, so a changed rule fails until its twin follows); where cel-python is installed, the tests also
  evaluate the rule text itself and compare it with the twin;
- RBAC grants collected per service account (``grants``), for the least-privilege tests.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Iterator, Mapping
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import yaml

from tests.support.paths import DEPLOY
from tests.support.rbac_audit import BUILTIN_ROLES

# The newest Kubernetes whose schemas kubernetes-validate 1.37 ships (offline, in the package).
K8S_VERSION = "1.37.0"
NAMESPACE = "submariner-operator"
BROKER_NAMESPACE = "submariner-k8s-broker"


@attrs.frozen
class Manifest:
    """One YAML document of a file under deploy/."""

    path: Path
    index: int
    doc: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.doc["kind"])

    @property
    def name(self) -> str:
        return str(self.doc["metadata"]["name"])

    def __str__(self) -> str:
        return f"{self.path.relative_to(DEPLOY)}#{self.index} {self.kind}/{self.name}"


def manifests(under: str = "") -> list[Manifest]:
    """Every non-empty document of every deploy/**/*.yaml file (``under``: only that subdirectory).

    Read once per test session: the documents are shared, so a test that changes one changes a deep copy.
    """
    return [m for m in _all_manifests() if not under or m.path.is_relative_to(DEPLOY / under)]


@functools.cache
def _all_manifests() -> tuple[Manifest, ...]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: a few times faster
    out = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        if path.is_relative_to(DEPLOY / "helm") or path.is_relative_to(DEPLOY / "kustomize"):
            continue  # sources of the same objects, rendered and checked by tests/deploy/test_helm_*.py
        with path.open(encoding="utf-8") as f:
            docs = [d for d in yaml.load_all(f, Loader=loader) if d]
        out += [Manifest(path, i, d) for i, d in enumerate(docs)]
    return tuple(out)


def find(kind: str, name: str) -> dict[str, Any]:
    """The one manifest of ``kind`` named ``name`` (AssertionError when there is not exactly one)."""
    found = [m.doc for m in manifests() if m.kind == kind and m.name == name and "examples" not in m.path.parts]
    assert len(found) == 1, f"{len(found)} manifests {kind}/{name}"
    return found[0]


@functools.cache
def crds() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> that version's openAPIV3Schema, for every CRD under deploy/crds."""
    out = {}
    for m in manifests("crds"):
        spec = m.doc["spec"]
        for version in spec["versions"]:
            out[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = version["schema"]["openAPIV3Schema"]
    return out


# ----- formats ------------------------------------------------------------------------------------------

FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("ipv4", raises=ValueError)
def _ipv4(value: object) -> bool:
    if isinstance(value, str):
        IPv4Address(value)  # dotted quad, no leading zeros: what magw.snapshot.fields.ipv4 accepts
    return True


@FORMATS.checks("cidr", raises=ValueError)
def _cidr(value: object) -> bool:
    # The API server's cidr format accepts host bits (Go's net.ParseCIDR); the CRDs' CEL rule refuses them.
    if isinstance(value, str):
        IPv4Network(value, strict=False)
    return True


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    if isinstance(value, str):
        if "T" not in value.upper():
            raise ValueError("RFC 3339 needs a T between date and time")
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    return True


# ----- structural schema -> JSON Schema -----------------------------------------------------------------


def to_json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD's structural schema as JSON Schema (see the module docstring for what is kept)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = to_json_schema(value)
        elif key == "x-kubernetes-list-type" and value == "set":
            out["uniqueItems"] = True
        elif key.startswith("x-kubernetes-") or key in ("description", "default"):
            continue
        else:
            out[key] = value
    closed = "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields")
    if node.get("type") == "object" and closed and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


# ----- the CEL rules and their twins --------------------------------------------------------------------

_Q = "self.split('/')[0].split('.')"
_POWERS = ", ".join(str(2 ** (32 - length)) for length in range(33))
CIDR_RULE = (
    f"(int({_Q}[0]) * 16777216 + int({_Q}[1]) * 65536 + int({_Q}[2]) * 256 + int({_Q}[3])) "
    f"% [{_POWERS}][int(self.split('/')[1])] == 0"
)
OPERATOR_RULE = (
    "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0)"
    " : (!has(self.values) || size(self.values) == 0)"
)
SUBMARINER_NAME_RULE = "self.metadata.name == 'submariner'"
EGRESS_CONFIG_NAME_RULE = "self.metadata.name == 'default'"
UNIQUE_BINDINGS_RULE = (
    "self.all(b, self.filter(c, c.namespace == b.namespace && (has(c.service) ? c.service : '') =="
    " (has(b.service) ? b.service : '')).size() == 1)"
)


def _unique_bindings(value: Any) -> bool:
    keys = [(b["namespace"], b.get("service", "")) for b in value]
    return len(set(keys)) == len(keys)


def _no_host_bits(value: Any) -> bool:
    try:
        address, length = value.split("/")
        return int(IPv4Address(address)) % 2 ** (32 - int(length)) == 0
    except (ValueError, AttributeError):
        return False  # CEL: the rule fails with an evaluation error


def _operator_values(value: Any) -> bool:
    has_values = bool(value.get("values"))
    return has_values if value["operator"] in ("In", "NotIn") else not has_values


TWINS: dict[str, Callable[[Any], bool]] = {
    CIDR_RULE: _no_host_bits,
    OPERATOR_RULE: _operator_values,
    SUBMARINER_NAME_RULE: lambda value: value["metadata"]["name"] == "submariner",
    EGRESS_CONFIG_NAME_RULE: lambda value: value["metadata"]["name"] == "default",
    UNIQUE_BINDINGS_RULE: _unique_bindings,
}


def rules(schema: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every ``x-kubernetes-validations`` entry anywhere in ``schema``."""
    yield from schema.get("x-kubernetes-validations", ())
    for sub in (schema.get("properties") or {}).values():
        yield from rules(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            yield from rules(schema[key])


def rule_errors(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """What the CEL rules and list-map keys of ``schema`` refuse in ``value`` (by the twins)."""
    own = schema.get("x-kubernetes-validations", ())
    errors = [f"{path}: {r['message']}" for r in own if not TWINS[r["rule"]](value)]
    if isinstance(value, dict):
        for key, item in value.items():
            sub = (schema.get("properties") or {}).get(key)
            if sub is None and isinstance(schema.get("additionalProperties"), Mapping):
                sub = schema["additionalProperties"]
            if sub is not None:
                errors += rule_errors(sub, item, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        if schema.get("x-kubernetes-list-type") == "map":
            keys = [tuple(item.get(k) for k in schema["x-kubernetes-list-map-keys"]) for item in value]
            errors += [f"{path}: duplicate entries for key {k}" for k in sorted(set(keys)) if keys.count(k) > 1]
        for i, item in enumerate(value):
            errors += rule_errors(schema["items"], item, f"{path}[{i}]")
    return errors


def pruned(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` without the null fields the API server drops: a field whose schema is not ``nullable`` and
    is null is pruned before validation (a merge patch's ``public_ip: null`` inside a list lands here)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, Mapping) else {})
            if item is None and not sub.get("nullable"):
                continue
            out[key] = pruned(sub, item)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [pruned(schema["items"], item) for item in value]
    return value


def cr_errors(cr: Mapping[str, Any]) -> list[str]:
    """Everything the API server would refuse in custom resource ``cr`` (empty: it would be admitted)."""
    schema = crds()[(cr["apiVersion"], cr["kind"])]
    cr = pruned(schema, cr)
    validator = jsonschema.Draft7Validator(to_json_schema(schema), format_checker=FORMATS)
    errors = [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(cr)]
    return errors + rule_errors(schema, cr)


# ----- RBAC -----------------------------------------------------------------------------------------------


@attrs.frozen
class Grant:
    """One verb on one resource, cluster-wide (``namespace`` "") or in one namespace; ``names`` "" = any."""

    namespace: str
    group: str
    resource: str
    verb: str
    names: tuple[str, ...] = ()


def grants(namespace: str, service_account: str, docs: list[dict[str, Any]] | None = None) -> set[Grant]:
    """Everything the bindings under deploy/ (or in ``docs``, e.g. a rendered chart) give service account
    ``namespace/service_account``."""
    if docs is None:
        docs = [m.doc for m in manifests() if "examples" not in m.path.parts]
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}
    roles.update(BUILTIN_ROLES)  # system:auth-delegator, as every cluster defines it
    out: set[Grant] = set()
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subject = {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
        if subject not in binding["subjects"]:
            continue
        scope = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], "" if ref["kind"] == "ClusterRole" else scope, ref["name"])]
        for rule in role["rules"]:
            names = tuple(rule.get("resourceNames", ()))
            out |= {
                Grant(scope, group, resource, verb, names)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    return out


WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
