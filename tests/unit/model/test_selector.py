"""Label selectors against the rules the Kubernetes documentation states (Labels and Selectors,
"Set-based requirement" and "Resources that support set-based requirements"). Each expected value below is
written from those rules, not from the code:

- ``In``: the key exists and its value is in the set;
- ``NotIn``: the key does not exist, or its value is not in the set;
- ``Exists`` / ``DoesNotExist``: the key exists / does not, whatever the value;
- ``matchLabels`` entries and ``matchExpressions`` are ANDed; ``{k: v}`` is ``k In (v)``;
- an empty selector matches every object (for a GlobalEgressIP, an absent one means the whole namespace at a
  lower precedence: ``magw.ipam.precedence``).
"""

from __future__ import annotations

import pytest

from magw.model.selector import SelectorError, parse_selector

DB = {"role": "db", "tier": "backend"}
WEB = {"role": "web"}
NONE: dict[str, str] = {}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"matchExpressions": [{"key": "role", "operator": "In", "values": ["db", "cache"]}]}, DB, True),
        ({"matchExpressions": [{"key": "role", "operator": "In", "values": ["db", "cache"]}]}, WEB, False),
        ({"matchExpressions": [{"key": "role", "operator": "In", "values": ["db"]}]}, NONE, False),
        ({"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["db"]}]}, DB, False),
        ({"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["db"]}]}, WEB, True),
        ({"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["db"]}]}, NONE, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, DB, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, WEB, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, DB, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, WEB, True),
        ({"matchLabels": {"role": "db"}}, DB, True),
        ({"matchLabels": {"role": "db"}}, WEB, False),
        ({"matchLabels": {"role": "db", "tier": "frontend"}}, DB, False),
        (
            {
                "matchLabels": {"role": "db"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["backend"]}],
            },
            DB,
            False,
        ),
        (
            {"matchLabels": {"role": "db"}, "matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]},
            DB,
            True,
        ),
        ({}, DB, True),
        ({}, NONE, True),
        ({"matchLabels": {}, "matchExpressions": []}, NONE, True),
    ],
)
def test_documented_semantics(selector: dict[str, object], labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "operator In needs at least one value"),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]},
            "operator NotIn needs at least one value",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "operator Exists takes no values",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
            "'Equals' is not one of In, NotIn",
        ),
        ({"matchLabels": {"bad key!": "x"}}, "is not a valid label key"),
        ({"matchLabels": {"a": "-starts-with-dash"}}, "is not a valid label value"),
        ({"matchLabel": {"a": "b"}}, "unknown field 'matchLabel'"),
        (["role=db"], "expected a mapping"),
    ],
)
def test_bad_selectors_are_one_line(selector: object, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_selector(selector)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_prefixed_keys_and_empty_values_are_valid() -> None:
    sel = parse_selector({"matchLabels": {"app.kubernetes.io/name": ""}})
    assert sel.matches({"app.kubernetes.io/name": ""})
    assert not sel.matches({"app.kubernetes.io/name": "x"})
