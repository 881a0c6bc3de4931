"""Pure: the verify suite's result as a table for people (every failing pair named with the hop where it died) and
as one JSON document for scripts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from magw.ops.verify.failover import FailoverReport
from magw.ops.verify.failover import table as failover_table
from magw.ops.verify.suite import Cell, SuiteResult


def report_json(lab: str, suite: SuiteResult, failover: FailoverReport | None) -> dict[str, Any]:
    ok = suite.ok and (failover is None or failover.ok)
    return {
        "lab": lab,
        "ok": ok,
        "checks": [c.as_json() for c in suite.cells],
        "gateways": [g.as_json() for g in suite.gateways],
        "ovn_checks": [{"ok": c.ok, "how": c.how, "what": c.what, "text": c.text} for c in suite.ovn],
        "failing": [f"{c.client.name} -> {c.target} {c.proto}: {_why(c)}" for c in suite.cells if not c.ok]
        + [f"gateway {g.gateway} ({g.pair}): {g.text()}" for g in suite.gateways if not g.ok]
        + [f"ovn {c.how} {c.what}: {c.text}" for c in suite.ovn if not c.ok],
        "failover": failover.as_json() if failover is not None else None,
    }


def _why(cell: Cell) -> str:
    """What the probe saw (its error), then where the trace says the packets died: both, one does not replace the
    other."""
    return "; ".join(x for x in (cell.detail, cell.hop) if x) or "no answer"


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]


def _cell_row(c: Cell) -> list[str]:
    target = f"{c.target} {c.ip} ({c.via})" if c.ip is not None else c.target
    return [c.kind, c.client.name, target, c.proto, "OK" if c.ok else "FAIL", c.detail]


def table(suite: SuiteResult, failover: FailoverReport | None) -> str:
    rows = [["check", "client", "target", "proto", "result", "detail"], *(_cell_row(c) for c in suite.cells)]
    out = _columns(rows)
    if suite.gateways:
        out.append("")
        grows = [["gateway", "pair", "result", f"flows ({suite.flows} per pair, traced)"]]
        grows += [[g.gateway, g.pair, "OK" if g.ok else "FAIL", g.text()] for g in suite.gateways]
        out += _columns(grows)
    if suite.ovn:
        out += ["", "OVN checks (magw lab verify):", *(c.line() for c in suite.ovn)]
    failing = [c for c in suite.cells if not c.ok]
    bad_gws = [g for g in suite.gateways if not g.ok]
    if failover is not None:
        out += ["", failover_table(failover).rstrip("\n")]
    out.append("")
    for c in failing:
        out.append(f"FAIL {c.client.name} -> {c.target} ({c.proto}): {_why(c)}")
    for g in bad_gws:
        out.append(f"FAIL gateway {g.gateway} ({g.pair}): {g.text()}")
    for check in suite.ovn:
        if not check.ok:
            out.append(f"FAIL ovn {check.how} {check.what}: {check.text}")
    passed = sum(c.ok for c in suite.cells) + sum(g.ok for g in suite.gateways) + sum(c.ok for c in suite.ovn)
    total = len(suite.cells) + len(suite.gateways) + len(suite.ovn)
    verdict = "OK" if suite.ok and (failover is None or failover.ok) else "FAIL"
    out.append(
        f"{verdict}: {passed}/{total} checks passed"
        + ("" if failover is None else f"; failover {'OK' if failover.ok else 'FAIL'}")
    )
    return "\n".join(out) + "\n"
