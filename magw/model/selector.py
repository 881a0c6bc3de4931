"""Kubernetes label selectors (``metav1.LabelSelector``): parsing and matching, pure.

Semantics, as the Kubernetes documentation states them
(https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#resources-that-support-set-based-requirements):

- ``matchLabels`` ``{k: v}`` is the requirement ``k In (v)``;
- every requirement of ``matchLabels`` and ``matchExpressions`` must hold (AND);
- ``In``: the label is present and its value is one of ``values`` (non-empty);
- ``NotIn``: the label is absent, or its value is none of ``values`` (non-empty);
- ``Exists``: the label is present, whatever its value (``values`` must be empty);
- ``DoesNotExist``: the label is absent (``values`` must be empty);
- an **empty** selector (``{}``) matches every object. An **absent** selector is not a ``LabelSelector``
  at all: what it means is up to the field that holds it (for a GlobalEgressIP, "the whole namespace",
  see ``magw.model.globalnet``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping

import attrs

# A label key: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters.
_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
_KEY_RE = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")


class SelectorError(ValueError):
    """A selector that cannot be used; ``str()`` is one line naming the bad part."""


class Operator(enum.Enum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@attrs.frozen
class Requirement:
    """One ``matchExpressions`` entry (``values`` sorted and unique)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator is Operator.EXISTS:
            return present
        if self.operator is Operator.DOES_NOT_EXIST:
            return not present
        if self.operator is Operator.IN:
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


def _pairs(value: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted(items))


@attrs.frozen
class LabelSelector:
    """``matchLabels`` AND ``matchExpressions``. The empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs)
    match_expressions: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    def to_dict(self) -> dict[str, object]:
        """The Kubernetes shape (``matchLabels``/``matchExpressions``), for statuses and ``globalnet show``."""
        out: dict[str, object] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [
                {"key": r.key, "operator": r.operator.value, **({"values": list(r.values)} if r.values else {})}
                for r in self.match_expressions
            ]
        return out


def _check_key(key: object, where: str) -> str:
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise SelectorError(f"{where}: {key!r} is not a valid label key")
    return key


def _check_value(value: object, where: str) -> str:
    if not isinstance(value, str) or len(value) > 63 or not _VALUE_RE.match(value):
        raise SelectorError(f"{where}: {value!r} is not a valid label value")
    return value


def _requirement(raw: object, where: str) -> Requirement:
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: expected a mapping with key, operator and values")
    unknown = sorted(str(k) for k in raw if k not in ("key", "operator", "values"))
    if unknown:
        raise SelectorError(f"{where}: unknown field {unknown[0]!r} (known: key, operator, values)")
    key = _check_key(raw.get("key"), f"{where}.key")
    op_text = raw.get("operator")
    try:
        operator = Operator(op_text)
    except ValueError:
        known = ", ".join(o.value for o in Operator)
        raise SelectorError(f"{where}.operator: {op_text!r} is not one of {known}") from None
    values_raw = raw.get("values", [])
    if values_raw is None:
        values_raw = []
    if not isinstance(values_raw, list):
        raise SelectorError(f"{where}.values: expected a list of strings")
    values = tuple(sorted({_check_value(v, f"{where}.values") for v in values_raw}))
    if operator in (Operator.IN, Operator.NOT_IN) and not values:
        raise SelectorError(f"{where}: operator {operator.value} needs at least one value")
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        raise SelectorError(f"{where}: operator {operator.value} takes no values")
    return Requirement(key=key, operator=operator, values=values)


def parse_selector(raw: object, where: str = "podSelector") -> LabelSelector:
    """A ``LabelSelector`` from its Kubernetes shape; ``SelectorError`` (one line) when it is not one.

    ``None`` is refused here: the caller decides what an absent selector means.
    """
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: expected a mapping with matchLabels and/or matchExpressions")
    unknown = sorted(str(k) for k in raw if k not in ("matchLabels", "matchExpressions"))
    if unknown:
        raise SelectorError(f"{where}: unknown field {unknown[0]!r} (known: matchLabels, matchExpressions)")
    labels_raw = raw.get("matchLabels") or {}
    if not isinstance(labels_raw, Mapping):
        raise SelectorError(f"{where}.matchLabels: expected a mapping of label keys to values")
    labels = [
        (_check_key(k, f"{where}.matchLabels"), _check_value(v, f"{where}.matchLabels.{k}"))
        for k, v in labels_raw.items()
    ]
    exprs_raw = raw.get("matchExpressions") or []
    if not isinstance(exprs_raw, list):
        raise SelectorError(f"{where}.matchExpressions: expected a list")
    exprs = tuple(_requirement(r, f"{where}.matchExpressions[{i}]") for i, r in enumerate(exprs_raw))
    return LabelSelector(match_labels=labels, match_expressions=exprs)
