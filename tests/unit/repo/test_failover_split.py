"""``benchmarks/failover_split.py``: the phases of a failover read from route agent logs written as the daemons
write them (one JSON object per line), relative to the fault instant; nothing before it counts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import failover_split

T0 = datetime(2026, 11, 29, 5, 0, 0, tzinfo=UTC).timestamp()


def _line(offset_ms: float, event: str, **fields: object) -> str:
    stamp = datetime.fromtimestamp(T0 + offset_ms / 1000, UTC).isoformat().replace("+00:00", "Z")
    return json.dumps({"event": event, "timestamp": stamp, "level": "info", **fields})


def test_each_observer_phase_is_its_first_line_after_the_fault(tmp_path: Path) -> None:
    (tmp_path / "route-agent-east-w1.log").write_text(
        "\n".join(
            [
                _line(-500, "health.first_miss", peer="east-gw1"),  # an earlier blip: before the fault
                _line(-400, "health.state_changed", peer="east-gw1", new="down"),
                _line(-390, "reconciler.sync_done", reasons="health", took_ms=3.0),
                "not json",
                _line(61, "health.first_miss", peer="east-gw2"),  # another peer
                _line(62, "health.first_miss", peer="east-gw1"),
                _line(65, "reconciler.sync_done", reasons="broker", took_ms=1.0),  # before the down
                _line(121, "health.state_changed", peer="east-gw1", new="down"),
                _line(122, "netlink.fastpath.apply_done", ops=2),  # a broker sync's ops
                _line(124, "reconciler.sync_done", reasons="broker", took_ms=1.0),  # not for health
                _line(125, "netlink.fastpath.apply_done", ops=1),  # the health sync's group replace
                _line(126, "netlink.fastpath.apply_done", ops=1),
                _line(128, "reconciler.sync_done", reasons="health,broker", took_ms=6.5),
            ]
        )
    )
    (tmp_path / "route-agent-west-gw1.log").write_text(
        "\n".join(
            [
                _line(40, "health.first_miss", peer="east-gw1"),
                _line(100, "health.state_changed", peer="east-gw1", new="down"),
                _line(110, "reconciler.sync_done", reasons="health", took_ms=9.0),
            ]
        )
    )
    rows = failover_split.split(
        tmp_path,
        [("east-w1", "local worker"), ("west-gw1", "remote gateway"), ("west-gw2", "remote gateway")],
        "east-gw1",
        T0,
    )
    w1, g1, g2 = rows
    phases = ("first_miss_ms", "down_ms", "groups_ms", "kernel_ms", "sync_took_ms")
    assert [getattr(w1, p) for p in phases] == [62.0, 121.0, 125.0, 128.0, 6.5]
    assert [getattr(g1, p) for p in phases] == [40.0, 100.0, None, 110.0, 9.0]  # its log has no group replace
    assert (g2.first_miss_ms, g2.down_ms, g2.groups_ms, g2.kernel_ms) == (None, None, None, None)  # no log at all
    medians = failover_split.summary(rows)
    assert medians["remote gateway"] == {
        "first_miss_ms": 40.0,
        "down_ms": 100.0,
        "groups_ms": None,
        "kernel_ms": 110.0,
        "sync_took_ms": 9.0,
    }
    text = failover_split.lines("resilient fail 1/4", rows)
    assert text[0].endswith(
        "local worker (1): first miss 62 ms, then down +59, then groups +4, kernel +7 (sync 6) = 125 / 128 ms after"
        " the fault"
    )
