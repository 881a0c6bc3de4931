"""A check's verdict and fix, a node's report, and how both print (text and JSON)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import attrs


class Verdict(enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@attrs.frozen(kw_only=True)
class Check:
    """One check: its topic, what it looked at (``name``), the verdict, what was seen, and the fix (empty on pass)."""

    topic: str
    name: str
    verdict: Verdict
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "name": self.name, "verdict": self.verdict.value, "detail": self.detail,
                "fix": self.fix}


def passed(topic: str, name: str, detail: str) -> Check:
    return Check(topic=topic, name=name, verdict=Verdict.PASS, detail=detail)


def warned(topic: str, name: str, detail: str, fix: str) -> Check:
    return Check(topic=topic, name=name, verdict=Verdict.WARN, detail=detail, fix=fix)


def failed(topic: str, name: str, detail: str, fix: str) -> Check:
    return Check(topic=topic, name=name, verdict=Verdict.FAIL, detail=detail, fix=fix)


@attrs.frozen(kw_only=True)
class NodeReport:
    """Every check run on one node (``node``: its name, or the namespace, or ``current``)."""

    node: str
    netns: str | None
    checks: tuple[Check, ...]

    @property
    def verdict(self) -> Verdict:
        return worst(c.verdict for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "netns": self.netns, "verdict": self.verdict.value,
                "checks": [c.to_json() for c in self.checks]}


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    seen = set(verdicts)
    for v in (Verdict.FAIL, Verdict.WARN):
        if v in seen:
            return v
    return Verdict.PASS


def counts(reports: Sequence[NodeReport]) -> dict[str, int]:
    out = {v.value: 0 for v in Verdict}
    for r in reports:
        for c in r.checks:
            out[c.verdict.value] += 1
    return out


def text_lines(reports: Sequence[NodeReport]) -> list[str]:
    """One block per node: a line per check (``PASS topic name: detail``), the fix under each warn or fail."""
    lines: list[str] = []
    for r in reports:
        where = f" (netns {r.netns})" if r.netns and r.netns != r.node else ""
        lines.append(f"== {r.node}{where}: {r.verdict.value}")
        for c in r.checks:
            lines.append(f"{c.verdict.value.upper():4} {c.topic:8} {c.name}: {c.detail}")
            if c.fix:
                lines.append(f"     fix: {c.fix}")
    n = counts(reports)
    lines.append(f"{n['pass']} passed, {n['warn']} warnings, {n['fail']} failed")
    return lines


def exit_status(reports: Sequence[NodeReport]) -> int:
    """1 when any check failed, else 0 (warnings do not fail the run)."""
    return 1 if worst(r.verdict for r in reports) is Verdict.FAIL else 0
