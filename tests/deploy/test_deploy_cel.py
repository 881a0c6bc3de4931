"""The CEL of deploy/ evaluated: the CRDs' rules against their Python twins, and the route agent's Node policy.

The API server evaluates these expressions; no API server runs here. cel-python evaluates standard CEL, so
these tests run where it is installed (``pip install cel-python``) and are skipped elsewhere: the twins in
tests/support/deploy_checks.py still check every example and bad CR in tests/deploy/test_deploy_manifests.py.
Kubernetes adds
the strings extension to CEL; the one function of it that the rules use, ``split``, is given here with
cel-go's meaning (``'a/b'.split('/')`` is ``['a', 'b']``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.deploy_checks import (
    CIDR_RULE,
    EGRESS_CONFIG_NAME_RULE,
    OPERATOR_RULE,
    SUBMARINER_NAME_RULE,
    TWINS,
    find,
)

celpy = pytest.importorskip("celpy", reason="cel-python is not installed: the CEL text is checked by twins only")
celtypes = pytest.importorskip("celpy.celtypes")

ENV = celpy.Environment()


def _split(text: Any, separator: Any) -> Any:
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    """The value of ``expression``, or an exception (a CEL evaluation error) as a value."""
    program = ENV.program(ENV.compile(expression), functions={"split": _split})
    try:
        return program.evaluate({name: celpy.json_to_cel(value) for name, value in activation.items()})
    except celpy.CELEvalError as exc:
        return exc


def rule_passes(rule: str, value: Any) -> bool:
    """How the API server reads a rule's result: true admits, false or an evaluation error refuses."""
    result = evaluate(rule, {"self": value})
    return not isinstance(result, Exception) and bool(result == celtypes.BoolType(True))


# ----- the CRDs' rules and their twins --------------------------------------------------------------------


def _cidr(ip: int, length: int) -> str:
    return f"{ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}/{length}"


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 32), st.booleans())
def test_the_cidr_rule_agrees_with_its_twin(ip: int, length: int, masked: bool) -> None:
    """Half the cases are network addresses (admitted), the rest usually have host bits (refused)."""
    if masked:
        ip &= (2**32 - 1) ^ (2 ** (32 - length) - 1)
    value = _cidr(ip, length)
    assert rule_passes(CIDR_RULE, value) is TWINS[CIDR_RULE](value) is (ip % 2 ** (32 - length) == 0)


@pytest.mark.parametrize(
    ("value", "admitted"),
    [
        ("0.0.0.0/0", True),
        ("1.0.0.0/0", False),
        ("255.255.255.255/32", True),
        ("255.255.255.254/31", True),
        ("255.255.255.255/31", False),
        ("10.128.0.0/9", True),
        ("10.64.0.0/9", False),
        ("10.1.0.0/16", True),
    ],
)
def test_the_cidr_rule_at_the_edges(value: str, admitted: bool) -> None:
    assert rule_passes(CIDR_RULE, value) is TWINS[CIDR_RULE](value) is admitted


@pytest.mark.parametrize("operator", ["In", "NotIn", "Exists", "DoesNotExist"])
@pytest.mark.parametrize("values", [None, [], ["x"], ["x", "y"]])
def test_the_selector_operator_rule_agrees_with_its_twin(operator: str, values: list[str] | None) -> None:
    requirement: dict[str, Any] = {"key": "app", "operator": operator}
    if values is not None:
        requirement["values"] = values
    expected = bool(values) if operator in ("In", "NotIn") else not values
    assert rule_passes(OPERATOR_RULE, requirement) is TWINS[OPERATOR_RULE](requirement) is expected


@pytest.mark.parametrize(("name", "admitted"), [("submariner", True), ("submariner-2", False), ("other", False)])
def test_the_submariner_name_rule_agrees_with_its_twin(name: str, admitted: bool) -> None:
    obj = {"metadata": {"name": name}, "spec": {}}
    assert rule_passes(SUBMARINER_NAME_RULE, obj) is TWINS[SUBMARINER_NAME_RULE](obj) is admitted


@pytest.mark.parametrize(("name", "admitted"), [("default", True), ("default-2", False), ("other", False)])
def test_the_egress_config_name_rule_agrees_with_its_twin(name: str, admitted: bool) -> None:
    obj = {"metadata": {"name": name}, "spec": {}}
    assert rule_passes(EGRESS_CONFIG_NAME_RULE, obj) is TWINS[EGRESS_CONFIG_NAME_RULE](obj) is admitted


# ----- the route agent's Node policy ----------------------------------------------------------------------

POLICY = find("ValidatingAdmissionPolicy", "magw-route-agent-node-annotation")["spec"]
AGENT = "system:serviceaccount:submariner-operator:magw-route-agent"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"
ANNOTATION = "submariner.io/cniIfaceIp"
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "e-w1",
        "labels": {"kubernetes.io/hostname": "e-w1"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
    },
    "spec": {"podCIDR": "10.1.3.0/24"},
}


def admit(
    old: dict[str, Any], new: dict[str, Any], *, user: str = AGENT, node: str | None = "e-w1"
) -> list[str] | None:
    """The messages of the policy's failed validations ([] admits), or None when the policy does not apply."""
    extra = {NODE_NAME_KEY: [node]} if node is not None else {}
    request = {"operation": "UPDATE", "userInfo": {"username": user, "extra": extra}}
    activation: dict[str, Any] = {"request": request, "object": new, "oldObject": old}
    if not all(evaluate(c["expression"], activation) == True for c in POLICY["matchConditions"]):  # noqa: E712
        return None
    variables: dict[str, Any] = {}
    for variable in POLICY["variables"]:
        value = evaluate(variable["expression"], {**activation, "variables": variables})
        assert not isinstance(value, Exception), (variable["name"], value)
        variables[variable["name"]] = _plain(value)
    activation["variables"] = variables
    return [v["message"] for v in POLICY["validations"] if evaluate(v["expression"], activation) != True]  # noqa: E712


def _plain(value: Any) -> Any:
    """A CEL value back to JSON-like Python, to pass it on as a variable."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, str) else value


def _with_annotation(value: str | None, node: dict[str, Any] | None = None) -> dict[str, Any]:
    node = copy.deepcopy(node or NODE)
    if value is None:
        node["metadata"]["annotations"].pop(ANNOTATION, None)
    else:
        node["metadata"]["annotations"][ANNOTATION] = value
    return node


def test_the_agent_may_set_change_and_remove_its_own_nodes_annotation() -> None:
    with_ip = _with_annotation("10.1.3.1")
    assert admit(NODE, with_ip) == []
    assert admit(with_ip, _with_annotation("10.1.3.2")) == []
    assert admit(with_ip, NODE) == []


def test_the_agent_may_not_touch_another_node() -> None:
    other = copy.deepcopy(NODE)
    other["metadata"]["name"] = "e-gw1"
    assert admit(other, _with_annotation("10.1.3.1", other)) == [POLICY["validations"][0]["message"]]


def test_a_token_without_a_node_name_is_refused() -> None:
    """A token not bound to a pod (or a Kubernetes before 1.30) carries no node name: nothing is admitted."""
    assert admit(NODE, _with_annotation("10.1.3.1"), node=None) == [POLICY["validations"][0]["message"]]


@pytest.mark.parametrize(
    "change",
    [
        {"annotations": {"node.alpha.kubernetes.io/ttl": "0", "other.io/x": "1"}},
        {"annotations": {}},
        {"annotations": {"node.alpha.kubernetes.io/ttl": "30"}},
    ],
    ids=["adds-another", "removes-another", "changes-another"],
)
def test_the_agent_may_change_no_other_annotation(change: dict[str, Any]) -> None:
    new = copy.deepcopy(NODE)
    new["metadata"].update(change)
    assert admit(NODE, new) == [POLICY["validations"][1]["message"]]


@pytest.mark.parametrize("value", ["10.1.3.01", "10.1.3", "10.1.3.256", "10.1.3.1/24", "fd00::1", ""])
def test_the_annotation_must_be_an_ipv4_address(value: str) -> None:
    assert admit(NODE, _with_annotation(value)) == [POLICY["validations"][2]["message"]]


@pytest.mark.parametrize(
    "change",
    [
        ("labels", {"kubernetes.io/hostname": "e-w1", "submariner.io/gateway": "true"}),
        ("finalizers", ["magw.io/x"]),
        ("ownerReferences", [{"apiVersion": "v1", "kind": "Node", "name": "x", "uid": "1"}]),
    ],
    ids=["label", "finalizer", "owner"],
)
def test_the_agent_may_change_no_label_finalizer_or_owner(change: tuple[str, Any]) -> None:
    new = copy.deepcopy(NODE)
    new["metadata"][change[0]] = change[1]
    assert admit(NODE, new) == [POLICY["validations"][3]["message"]]


def test_the_agent_may_not_give_labels_to_a_node_without_any() -> None:
    old = copy.deepcopy(NODE)
    del old["metadata"]["labels"]
    assert admit(old, NODE) == [POLICY["validations"][3]["message"]]
    assert admit(old, _with_annotation("10.1.3.1", old)) == []


def test_the_agent_may_not_change_the_spec() -> None:
    new = copy.deepcopy(NODE)
    new["spec"]["unschedulable"] = True
    assert admit(NODE, new) == [POLICY["validations"][3]["message"]]


def test_other_users_are_not_the_policys_business() -> None:
    """The kubelet and administrators go through as before: the policy matches the route agent only."""
    new = copy.deepcopy(NODE)
    new["spec"]["unschedulable"] = True
    assert admit(NODE, new, user="system:node:e-w1") is None
    assert admit(NODE, new, user="system:serviceaccount:submariner-operator:magw-gateway") is None
