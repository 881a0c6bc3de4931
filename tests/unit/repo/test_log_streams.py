"""The suite's guard: every test starts with the session's logging (tests/support/log_streams.py)."""

from __future__ import annotations

import io
import logging

import structlog
from structlog.testing import capture_logs

from magw.util.logsetup import configure_logging
from tests.support import log_streams


def test_a_cli_configuration_on_a_closed_stream_is_undone() -> None:
    """What ``magw.cli.main`` leaves behind under capsys: warnings only, on a stream that is then closed. After
    ``restore``, info events reach ``capture_logs`` again and nothing writes to the closed stream."""
    start = log_streams.saved()
    gone = io.StringIO()
    configure_logging("json", "warning", stream=gone)
    gone.close()
    with capture_logs() as hidden:
        structlog.get_logger("t").info("filtered.out")
    assert hidden == []
    log_streams.restore(start)
    with capture_logs() as seen:
        structlog.get_logger("t").info("seen.again")
    assert [e["event"] for e in seen] == ["seen.again"]
    assert all(getattr(h, "stream", None) is not gone for h in logging.getLogger().handlers)
