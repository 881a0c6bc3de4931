"""Logging setup shared by the command line and the daemons.

structlog events (stable dotted names, flat keys) and the standard library's
records (pyroute2, asyncio) go to stderr in one format: ``console`` for people,
``json`` (one object per line) for machines. stdout stays free for command output.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

FORMATS = ("console", "json")
LEVELS = ("debug", "info", "warning", "error")


def configure_logging(fmt: str, level: str, *, stream: TextIO | None = None) -> None:
    """Send every log event at ``level`` or above to ``stream`` (stderr) as ``fmt``.

    Raises ValueError (one line) for an unknown format or level. Safe to call again:
    the last call wins.
    """
    if fmt not in FORMATS:
        raise ValueError(f"log format: unknown {fmt!r} (expected one of: {', '.join(FORMATS)})")
    if level not in LEVELS:
        raise ValueError(f"log level: unknown {level!r} (expected one of: {', '.join(LEVELS)})")
    out = stream if stream is not None else sys.stderr
    number = logging.getLevelNamesMapping()[level.upper()]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, _renderer(fmt)],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    _configure_stdlib(fmt, number, out, shared)


def _renderer(fmt: str) -> Any:
    if fmt == "json":
        return structlog.processors.JSONRenderer(sort_keys=True)
    # Plain tracebacks whether or not rich is installed (magw.cli keeps rich out for start-up time).
    return structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)


def _configure_stdlib(fmt: str, number: int, out: TextIO, shared: list[Any]) -> None:
    """Route standard-library records (e.g. pyroute2's warnings) through the same renderer."""
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, _renderer(fmt)],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_magw", False)]:
        root.removeHandler(old)
    handler._magw = True  # type: ignore[attr-defined]  # a marker so a second call replaces only our handler
    root.addHandler(handler)
    root.setLevel(number)
