"""Every test starts with the logging configuration the session started with.

``magw.cli.main`` (run in-process by CLI tests) configures structlog and the root logger for its run: a level
(warnings only by default) and the ``sys.stderr`` of that moment, which under ``capsys`` is closed when the test
ends. Left in place, that broke later tests in two ways seen in CI: ``capture_logs()`` saw no info events (the
level filter runs before its processors), and an in-process reconciler died writing to the closed file; when the
garbage collector found that task while pytest compiled a failure's source, CPython 3.11 stopped the whole run
("AST constructor recursion depth mismatch"). ``saved()`` is taken once, before any test; ``restore`` puts it back.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import structlog


@attrs.frozen
class Saved:
    structlog_config: dict[str, Any]
    handlers: list[logging.Handler]
    level: int


def saved() -> Saved:
    config = dict(structlog.get_config())
    config["processors"] = list(config["processors"])
    root = logging.getLogger()
    return Saved(structlog_config=config, handlers=list(root.handlers), level=root.level)


def restore(state: Saved) -> None:
    config = dict(state.structlog_config)
    config["processors"] = list(config["processors"])
    structlog.configure(**config)
    root = logging.getLogger()
    root.handlers[:] = state.handlers
    root.setLevel(state.level)
