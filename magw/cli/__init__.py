"""The ``magw`` command line: one module per subcommand, registered in ``magw.cli.main``.

A subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int``.
Global flags (``-v``, ``--log-format``) are added to every parser of the command,
nested sub-verbs included, by ``magw.cli.main``; logging is set up from them
before ``run`` is called. It raises ``UsageError`` (or ``magw.snapshot.load.SnapshotError``) for bad input: the
command line then prints ``magw: error: <message>`` on one line and exits 2.
"""

import sys

# Start-up cost, measured with ``python -X importtime -c "import magw.cli.main"``: ``import structlog``
# loads structlog.dev, which imports rich (when installed, here only as import-linter's dependency) for
# pretty tracebacks: about 0.1 s of CPU on every ``magw`` run, a third of the import time. magw never
# uses rich (magw.util.logsetup renders tracebacks with structlog's plain_traceback), so the command line keeps
# it out of the process; structlog then takes its fallback. Something that imported rich already keeps it.
if "rich" not in sys.modules:
    sys.modules["rich"] = None  # type: ignore[assignment]  # makes ``import rich`` raise ImportError


class UsageError(Exception):
    """Bad input to a subcommand. ``str()`` is the one-line message shown to the user."""


def log_level(verbose: int) -> str:
    """The log level that ``-v`` given ``verbose`` times asks for."""
    return {0: "warning", 1: "info"}.get(verbose, "debug")
