"""The suite's guard against logging left on a closed stream (tests/support/log_streams.py)."""

from __future__ import annotations

import io
import logging

import pytest
import structlog

from magw.util.logsetup import configure_logging
from tests.support.log_streams import repoint_closed_streams


def test_logging_on_a_closed_stream_is_pointed_at_stderr_again(capsys: pytest.CaptureFixture[str]) -> None:
    gone = io.StringIO()
    configure_logging("json", "info", stream=gone)
    gone.close()
    with pytest.raises(ValueError, match="closed file"):
        structlog.get_logger("t").info("before")
    repoint_closed_streams()
    structlog.get_logger("t").info("structlog.after")
    logging.getLogger("t.stdlib").warning("stdlib after")
    err = capsys.readouterr().err
    assert '"event": "structlog.after"' in err
    assert "stdlib after" in err


def test_an_open_stream_is_left_alone() -> None:
    kept = io.StringIO()
    configure_logging("json", "info", stream=kept)
    repoint_closed_streams()
    structlog.get_logger("t").info("kept.event")
    assert '"event": "kept.event"' in kept.getvalue()
