"""The topology's ``probe:`` section: the route agents' health probe tunables for the whole lab.

``probe: {interval: 0.08, min_interval: 0.03, budget: 1000, fast_interval: 0.02, timeout: 0.02, down_after: 3}``:
each key is optional and becomes the route agents' ``--probe-interval``, ``--probe-min-interval``,
``--probe-budget`` (probes per second, a whole number), ``--probe-fast-interval``, ``--probe-timeout`` and
``--down-after``
(docs/health.md); an absent key keeps the daemon's default (with the WireGuard cable, the lab's wider timeouts:
``magw.lab.planes.daemons``). The set is checked here as the daemon would check it, so a bad one is one line
naming ``probe`` before anything is built. ``benchmarks/failover.py --probe-*`` sweeps them.
"""

from __future__ import annotations

from typing import Any

import attrs

from magw.health.params import ProbeParams
from magw.lab.spec.parser import Parser

PROBE_KEYS = frozenset({"interval", "min_interval", "budget", "fast_interval", "timeout", "down_after"})
SECONDS_KEYS = ("interval", "min_interval", "fast_interval", "timeout")
MAX_BUDGET = 100_000
MAX_SECONDS = 10.0


@attrs.frozen(kw_only=True)
class ProbeSpec:
    """The tunables the topology sets (None: the daemon's default)."""

    interval: float | None = None
    min_interval: float | None = None
    budget: int | None = None
    fast_interval: float | None = None
    timeout: float | None = None
    down_after: int | None = None

    def flags(self) -> tuple[str, ...]:
        """The route agent's flags for the keys that are set."""
        out: list[str] = []
        for key in SECONDS_KEYS:
            value = getattr(self, key)
            if value is not None:
                out += [f"--probe-{key.replace('_', '-')}", f"{value:g}"]
        if self.budget is not None:
            out += ["--probe-budget", str(self.budget)]
        if self.down_after is not None:
            out += ["--down-after", str(self.down_after)]
        return tuple(out)

    def to_doc(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


def parse_probe(p: Parser, value: object, path: str = "probe") -> ProbeSpec:
    """Validate the ``probe`` mapping; the combination must make valid ``ProbeParams`` (with the defaults)."""
    doc = p.mapping(value, path, PROBE_KEYS)
    found: dict[str, Any] = {}
    for key in SECONDS_KEYS:
        if key in doc:
            v = doc[key]
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= MAX_SECONDS:
                raise p.fail(f"{path}.{key}", f"must be seconds above 0 and at most {MAX_SECONDS:g}, got {v!r}")
            found[key] = float(v)
    if "down_after" in doc:
        found["down_after"] = p.integer(doc["down_after"], f"{path}.down_after", 1, 10)
    if "budget" in doc:
        found["budget"] = p.integer(doc["budget"], f"{path}.budget", 0, MAX_BUDGET)
    try:
        ProbeParams(**found)
    except ValueError as exc:
        raise p.fail(path, str(exc)) from None
    return ProbeSpec(**found)
