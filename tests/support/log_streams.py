"""Logging must not outlive the stream a test gave it.

``magw.cli.main`` (run in-process by CLI tests) points structlog and the root logger's handler at the
``sys.stderr`` of that moment; under ``capsys`` that stream is closed when the test ends. A later test's
in-process daemon then logs into a closed file: its task dies with ``ValueError: I/O operation on closed file``,
and when the garbage collector finds that task while pytest compiles a failure's source, CPython 3.11 stops
the whole run ("AST constructor recursion depth mismatch", seen in CI). After every test, anything left
pointing at a closed stream is pointed at the current ``sys.stderr`` (the rest of the configuration stays).
"""

from __future__ import annotations

import contextlib
import logging
import sys

import structlog

_NO_LOCK = contextlib.nullcontext()


def repoint_closed_streams() -> None:
    factory = structlog.get_config().get("logger_factory")
    file = getattr(factory, "_file", None)
    if file is not None and getattr(file, "closed", False):
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and getattr(handler.stream, "closed", False):
            with handler.lock or _NO_LOCK:  # not setStream: it flushes the old, closed, stream
                handler.stream = sys.stderr
