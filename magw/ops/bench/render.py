"""Pure: benchmark rows (a lab's, ``magw.ops.bench.run.Row``, or a Kubernetes run's, ``magw.ops.bench.kube``) as a
table for people and a JSON document for scripts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from magw.ops.bench.stats import Latency, Throughput


class BenchRow(Protocol):
    @property
    def placement(self) -> str: ...
    @property
    def throughput(self) -> Throughput | None: ...
    @property
    def latency(self) -> Latency | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def skipped(self) -> bool: ...
    @property
    def ok(self) -> bool: ...
    def who(self) -> tuple[str, str, str]: ...
    def as_json(self) -> dict[str, Any]: ...


def report_json(
    kind: str, lab: str | None, rows: Sequence[BenchRow], settings: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "benchmark": kind,
        "lab": lab,
        **extra,
        "settings": settings,
        "ok": all(r.ok for r in rows),
        "results": [r.as_json() for r in rows],
    }


def _mbit(bps: float) -> str:
    return f"{bps / 1e6:.1f}"


def _ms(us: float) -> str:
    return f"{us / 1000:.3f}"


def table(kind: str, rows: Sequence[BenchRow]) -> str:
    if kind == "throughput":
        head = ["between", "client", "server", "target", "Mbit/s", "min..max per s", "retr", "streams"]
    else:
        head = ["between", "client", "server", "target", "proto", "p50 ms", "p90 ms", "p99 ms", "min..max ms", "lost"]
    lines = [head]
    errors = []
    for r in rows:
        client, server, target = r.who()
        base = [r.placement, client, server, target]
        if r.throughput is not None:
            t = r.throughput
            retr = "-" if t.retransmits is None else str(t.retransmits)
            lines.append(
                [
                    *base,
                    _mbit(t.received_bps),
                    f"{_mbit(t.interval_min_bps)}..{_mbit(t.interval_max_bps)}",
                    retr,
                    str(t.streams),
                ]
            )
        elif r.latency is not None:
            lat = r.latency
            lines.append(
                [
                    *base,
                    lat.proto,
                    _ms(lat.p50_us),
                    _ms(lat.p90_us),
                    _ms(lat.p99_us),
                    f"{_ms(lat.min_us)}..{_ms(lat.max_us)}",
                    f"{lat.lost}/{lat.sent}",
                ]
            )
        else:
            verdict = "SKIPPED" if r.skipped else "FAILED"
            lines.append([*base, verdict])
            errors.append(f"{verdict} {r.placement} {client} -> {server}: {r.error}")
    widths = [max(len(row[i]) for row in lines if i < len(row)) for i in range(len(head))]
    out = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in lines]
    out += errors
    return "\n".join(out) + "\n"
