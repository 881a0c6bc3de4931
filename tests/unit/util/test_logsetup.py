"""magw.util.logsetup: one format and one level for structlog events and standard-library records."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from magw.util.logsetup import configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state: put the defaults back after each test."""
    root = logging.getLogger()
    level = root.level
    yield
    structlog.reset_defaults()
    for handler in [h for h in root.handlers if getattr(h, "_magw", False)]:
        root.removeHandler(handler)
    root.setLevel(level)


def test_json_events_are_flat_objects_filtered_by_level() -> None:
    """At level info, an info event is one JSON line with its keys; a debug event is dropped."""
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    log = structlog.get_logger("t")
    log.debug("test.hidden", n=1)
    log.info("test.shown", ops=3, node="e-w1")
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [{k: v for k, v in e.items() if k != "timestamp"} for e in events] == [
        {"event": "test.shown", "level": "info", "ops": 3, "node": "e-w1"}
    ]


def test_stdlib_records_use_the_same_format() -> None:
    """A standard-library warning (as pyroute2 logs) comes out as JSON too, with its logger name."""
    out = io.StringIO()
    configure_logging("json", "warning", stream=out)
    logging.getLogger("pyroute2.fake").warning("socket %s closed", "x")
    logging.getLogger("pyroute2.fake").info("not shown")
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["event"], e["level"], e["logger"]) for e in events] == [("socket x closed", "warning", "pyroute2.fake")]


def test_reconfiguring_replaces_our_handler() -> None:
    """A second call does not duplicate output: the last configuration wins."""
    first, second = io.StringIO(), io.StringIO()
    configure_logging("console", "info", stream=first)
    configure_logging("console", "info", stream=second)
    logging.getLogger("t").warning("once")
    assert (first.getvalue(), second.getvalue().count("once")) == ("", 1)


@pytest.mark.parametrize(
    ("fmt", "level", "message"),
    [
        ("xml", "info", "log format: unknown 'xml' (expected one of: console, json)"),
        ("json", "loud", "log level: unknown 'loud' (expected one of: debug, info, warning, error)"),
    ],
)
def test_bad_settings_are_one_line_errors(fmt: str, level: str, message: str) -> None:
    """Unknown formats and levels are refused with a message naming the setting."""
    with pytest.raises(ValueError) as info:
        configure_logging(fmt, level)
    assert str(info.value) == message


def test_console_tracebacks_are_plain_text() -> None:
    """An exception logged in console format is rendered as the standard library's traceback, not a rich box."""
    out = io.StringIO()
    configure_logging("console", "info", stream=out)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        structlog.get_logger("t").exception("test.failed")
    text = out.getvalue()
    assert "Traceback (most recent call last):" in text
    assert "RuntimeError: boom" in text
    assert "╭" not in text
