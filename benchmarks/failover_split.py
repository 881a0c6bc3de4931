"""Where a failover's loss window goes, from the route agents' own logs (``benchmarks/failover.py`` prints it).

For every route agent that probes the victim (the local workers: flows toward the remote cluster; the remote
gateways: flows coming back), after the fault instant ``t0`` (wall clock, right before the victim's links went
down):

- **first miss**: its first ``health.first_miss`` of the victim. It includes the wait for the victim's next probe
  after the fault (up to one interval) and that probe's timeout;
- **down**: its ``health.state_changed`` of the victim to ``down`` (``down_after`` misses: the first miss plus
  ``down_after - 1`` more at the fast interval);
- **groups**: the first ``netlink.fastpath.apply_done`` of that sync: the nexthop group replace reached the kernel
  (what moves the flows; the sync's other changes, an nft table on a worker that keeps the client's address,
  come after it);
- **kernel**: the end of its first ``reconciler.sync_done`` after the down, one with ``health`` among its reasons
  (the plan, the diff and the nexthop group replace; ``took_ms`` is that sync's own time).

Each is in ms after ``t0``: the benchmark's is the moment the link the observer's probes cross was down (the
victim's underlay port for the local workers, its WAN port for the remote gateways: ``failure.fail``'s ``on_cut``),
and it reads the lines from the fault injection's start on, so a line before that moment shows negative. A flow's
loss window ends when the last of the two directions it uses is repaired, so the window's p50 sits near the later
of the local workers' and the remote gateways' kernel times.
"""

from __future__ import annotations

import json
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

PHASES = ("first_miss_ms", "down_ms", "groups_ms", "kernel_ms")


@attrs.frozen(kw_only=True)
class ObserverSplit:
    observer: str
    side: str  # "local worker" (the victim's cluster) or "remote gateway"
    first_miss_ms: float | None
    down_ms: float | None
    groups_ms: float | None
    kernel_ms: float | None
    sync_took_ms: float | None

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def log_lines(log: Path, t0: float) -> list[tuple[float, dict[str, Any], str]]:
    """(wall-clock seconds, event, raw line) of every JSON line of a daemon's ``log`` at or after ``t0`` (none when
    it cannot be read; lines that are not a JSON event with a timestamp are skipped)."""
    out = []
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            doc = json.loads(line)
            at = datetime.fromisoformat(str(doc["timestamp"]).replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError, TypeError):
            continue
        if at >= t0:
            out.append((at, doc, line))
    return out


def _events(log: Path, t0: float) -> list[tuple[float, dict[str, Any]]]:
    return [(at, doc) for at, doc, _line in log_lines(log, t0)]


def observer_split(
    log: Path, observer: str, side: str, victim: str, t0: float, since: float | None = None
) -> ObserverSplit:
    """One observer's phases (None where its log has no such line), from the lines at or after ``since`` (default
    ``t0``), in ms after ``t0`` (negative: before it)."""
    events = _events(log, t0 if since is None else since)
    miss = next((at for at, e in events if e.get("event") == "health.first_miss" and e.get("peer") == victim), None)
    down = next(
        (
            at
            for at, e in events
            if e.get("event") == "health.state_changed" and e.get("peer") == victim and e.get("new") == "down"
        ),
        None,
    )
    groups, kernel, took = None, None, None
    if down is not None:
        for at, e in events:
            if at < down:
                continue
            if groups is None and e.get("event") == "netlink.fastpath.apply_done":
                groups = at
            if e.get("event") == "reconciler.sync_done" and "health" in str(e.get("reasons", "")):
                kernel, took = at, e.get("took_ms")
                break
            if e.get("event") == "reconciler.sync_done":  # another sync's ops: not the health sync's groups
                groups = None

    def ms(at: float | None) -> float | None:
        return None if at is None else round((at - t0) * 1000, 1)

    return ObserverSplit(observer=observer, side=side, first_miss_ms=ms(miss), down_ms=ms(down),
                         groups_ms=ms(groups) if kernel is not None else None, kernel_ms=ms(kernel),
                         sync_took_ms=took)  # fmt: skip


def split(
    logs_dir: Path, observers: list[tuple[str, str]], victim: str, t0: float, since: float | None = None
) -> list[ObserverSplit]:
    """``observers``: (node, side) pairs; their route agents' logs are ``route-agent-<node>.log`` in ``logs_dir``."""
    return [observer_split(logs_dir / f"route-agent-{n}.log", n, side, victim, t0, since) for n, side in observers]


def summary(rows: list[ObserverSplit]) -> dict[str, dict[str, float | None]]:
    """Per side, the median of each phase over its observers (None when none logged it)."""
    out: dict[str, dict[str, float | None]] = {}
    for side in sorted({r.side for r in rows}):
        mine = [r for r in rows if r.side == side]
        out[side] = {}
        for phase in (*PHASES, "sync_took_ms"):
            values = [v for r in mine if (v := getattr(r, phase)) is not None]
            out[side][phase] = round(statistics.median(values), 1) if values else None
    return out


def lines(label: str, rows: list[ObserverSplit]) -> list[str]:
    """The split as printed: one line per side (medians over its observers), the phases as increments."""

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    out = []
    for side, s in summary(rows).items():
        miss, down, groups, kernel = s["first_miss_ms"], s["down_ms"], s["groups_ms"], s["kernel_ms"]
        misses = None if miss is None or down is None else down - miss
        to_groups = None if down is None or groups is None else groups - down
        react = None if down is None or kernel is None else kernel - down
        n = sum(1 for r in rows if r.side == side)
        out.append(
            f"{label:<24} split, {side} ({n}): first miss {f(miss)} ms, then down +{f(misses)}, then groups"
            f" +{f(to_groups)}, kernel +{f(react)} (sync {f(s['sync_took_ms'])}) = {f(groups)} / {f(kernel)} ms"
            " after the fault"
        )
    return out
