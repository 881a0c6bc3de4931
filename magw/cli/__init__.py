"""The ``magw`` command line: one module per subcommand, registered in ``magw.cli.main``.

A subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int``.
It raises ``UsageError`` (or ``magw.snapshot.SnapshotError``) for bad input: the
command line then prints ``magw: error: <message>`` on one line and exits 2.
"""


class UsageError(Exception):
    """Bad input to a subcommand. ``str()`` is the one-line message shown to the user."""
