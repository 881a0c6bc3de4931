"""The soak's report: a row per window and the closing summary (benchmarks/soak.py prints them)."""

from __future__ import annotations

from typing import Any


def row_text(i: int, r: dict[str, Any]) -> str:
    """One window's row under ``HEADER``, with the evidence of its violations on the lines below."""
    det = "-" if r["detection_s"] is None else f"{r['detection_s'] * 1000:.0f} ms"
    conv = "NO" if r["converged_s"] is None else f"{r['converged_s']:.1f} s"
    verdict = "ok" if not r["problems"] else "VIOLATED: " + "; ".join(r["problems"][:3])
    if r.get("spurious_downs"):
        some = ", ".join(r["spurious_downs"][:4])
        verdict += f" [probes called {len(r['spurious_downs'])} live peer(s) down: {some}]"
    evidence = [f"\n      {g['group']}: a flow that did not come back: {e}" for g in r["groups"]
                for e in g.get("dark_conntrack", [])]  # fmt: skip
    evidence += [f"\n      {g['group']}: drop counters that moved in the window: {e}" for g in r["groups"]
                 for e in g.get("drops_moved", [])]  # fmt: skip
    return (f"{i:>3} {r['kind']:<18} {r['target'][:34]:<34} {det:>8} {r['crossed_lost']:>6} "
            f"{r['crossed_window_ms']:>7.0f} {r['untouched_lost']:>5} {conv:>7}  {verdict}"
            + "".join(evidence))  # fmt: skip


HEADER = ("  # kind               target                             detected   lost  window  other  conv.   verdict\n"
          "                                                                   (crossed, ms)   lost")  # fmt: skip


def summary(doc: dict[str, Any], rss_bound_mib: float, fd_bound: int) -> list[str]:
    """The run's closing lines; the bounds are the ones the run judged the daemons' growth by."""
    rows = doc["faults"]
    bad = [r for r in rows if r["problems"]]
    kinds = sorted({r["kind"] for r in rows})
    conv = [r["converged_s"] for r in rows if r["converged_s"] is not None]
    det = [r["detection_s"] for r in rows if r["detection_s"] is not None]
    checks = [r["check_s"] for r in rows if r.get("check_s") is not None]
    worst_rss = max((v["rss_growth_mib"] for v in doc["resources"].values()), default=0.0)
    worst_fd = max((v["fd_growth"] for v in doc["resources"].values()), default=0)
    return [
        f"faults: {len(rows)} of {len(kinds)} kinds ({', '.join(kinds)}) in {doc['elapsed_s']:.0f} s,"
        f" seed {doc['seed']}",
        f"violated invariants: {sum(len(r['problems']) for r in rows)} in {len(bad)} windows",
        f"datagrams lost by groups that did not cross a fault: {sum(r['untouched_lost'] for r in rows)}",
        f"longest loss window of a crossed group: {max((r['crossed_window_ms'] for r in rows), default=0):.0f} ms",
        f"convergence after the heal: max {max(conv, default=0):.1f} s (the passing check itself took "
        f"{min(checks, default=0):.1f}-{max(checks, default=0):.1f} s); detection (power/WAN): "
        f"max {max(det, default=0) * 1000:.0f} ms",
        f"daemons' worst growth from their baseline: RSS +{worst_rss:.1f} MiB (bound {rss_bound_mib:g}), "
        f"fds +{worst_fd} (bound {fd_bound})",
    ]  # fmt: skip
