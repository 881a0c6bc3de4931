"""A lab log's JSON event lines: objects kept in order, anything else (plain text, broken JSON, arrays) skipped."""

from __future__ import annotations

from pathlib import Path

from magw.lab.observe.jsonlog import json_events


def test_only_json_objects_are_events(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text('{"event": "a", "t": 1}\nTraceback (most recent call last):\n{"event": \n[1, 2]\n{"event": "b"}\n')
    assert json_events(log) == [{"event": "a", "t": 1}, {"event": "b"}]
    assert json_events(tmp_path / "missing.log") == []
