"""Kubernetes conditions (metav1.Condition) built and merged per the API conventions. Pure.

A status lists at most one condition per ``type``. ``lastTransitionTime`` is the moment the *status* last
changed (True/False/Unknown), not the moment anything was written: a writer that restamps it on every
patch makes ``kubectl wait``, alerts and humans believe the object flaps. So ``set_condition`` keeps the
existing time when the status is unchanged, even if reason, message or observedGeneration moved on.

Conditions are plain dicts in and out (the shape of the JSON the API server stores), so a status writer
can merge into what it read without a round trip through models.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import attrs

Status = Literal["True", "False", "Unknown"]
STATUSES: tuple[str, ...] = ("True", "False", "Unknown")

# metav1.Condition validation: type is a qualified name, reason a CamelCase identifier (1..1024).
_TYPE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                   r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")  # fmt: skip
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
MAX_MESSAGE = 32768  # the API server's limit on message


def rfc3339(when: datetime) -> str:
    """metav1.Time's wire form: UTC, whole seconds, ``Z`` (what the API server writes back)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_type(_: object, __: object, value: str) -> None:
    if len(value) > 316 or not _TYPE.match(value):
        raise ValueError(f"condition type: {value!r} is not a qualified name")


def _check_reason(_: object, __: object, value: str) -> None:
    if len(value) > 1024 or not _REASON.match(value):
        raise ValueError(f"condition reason: {value!r} is not CamelCase ([A-Za-z][A-Za-z0-9_,:]*)")


def _clip(message: str) -> str:
    return message[:MAX_MESSAGE]


@attrs.frozen(kw_only=True)
class KubeCondition:
    """One condition to write, validated as the API server does; ``to_dict`` gives the wire form with a given
    transition time (``set_condition`` decides it). Not ``GlobalnetCondition`` (``magw.model.globalnet``), a
    stored condition that carries its time."""

    type: str = attrs.field(validator=_check_type)
    status: Status = attrs.field(validator=attrs.validators.in_(STATUSES))
    reason: str = attrs.field(validator=_check_reason)
    message: str = attrs.field(default="", converter=_clip)
    observed_generation: int | None = None

    @classmethod
    def from_dict(cls, cond: Mapping[str, Any]) -> KubeCondition:
        """A condition read back (its lastTransitionTime is for ``merge_conditions`` to decide)."""
        return cls(
            type=cond["type"],
            status=cond["status"],
            reason=cond["reason"],
            message=cond.get("message") or "",
            observed_generation=cond.get("observedGeneration"),
        )

    def to_dict(self, last_transition: datetime | str) -> dict[str, Any]:
        when = last_transition if isinstance(last_transition, str) else rfc3339(last_transition)
        out: dict[str, Any] = {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": when,
        }
        if self.observed_generation is not None:
            out["observedGeneration"] = self.observed_generation
        return out


def set_condition(
    existing: Iterable[Mapping[str, Any]], new: KubeCondition, now: datetime | str | None = None
) -> list[dict[str, Any]]:
    """``existing`` with ``new`` in place of any condition of its type, in the original order (new types last).

    The transition time is kept from the existing entry of the type when its status is the same (and it
    has one); otherwise it is ``now`` (a datetime or an RFC 3339 string; default: the current UTC time).
    Duplicate entries of ``new.type`` collapse into one. The input is not modified.
    """
    stamp = now if now is not None else datetime.now(UTC)
    out: list[dict[str, Any]] = []
    placed = False
    for cond in existing:
        if cond.get("type") != new.type:
            out.append(dict(cond))
            continue
        if placed:
            continue  # one entry per type
        kept = cond.get("lastTransitionTime")
        unchanged = cond.get("status") == new.status and isinstance(kept, str) and kept
        out.append(new.to_dict(kept if unchanged and isinstance(kept, str) else stamp))
        placed = True
    if not placed:
        out.append(new.to_dict(stamp))
    return out


def merge_conditions(
    existing: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]], now: datetime | None = None
) -> list[dict[str, Any]]:
    """``set_condition`` of each of ``new`` (wire dicts) onto ``existing``: a writer merges what it computed
    onto what the server holds, so conditions of other types stay and an unchanged status keeps the server's
    transition time. A changed status takes the new entry's own lastTransitionTime (when it was computed),
    or ``now`` if it has none."""
    out = [dict(c) for c in existing]
    for cond in new:
        stamp = cond.get("lastTransitionTime")
        out = set_condition(out, KubeCondition.from_dict(cond), stamp if isinstance(stamp, str) and stamp else now)
    return out


def find_condition(conditions: Iterable[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_``, or None."""
    return next((c for c in conditions if c.get("type") == type_), None)
