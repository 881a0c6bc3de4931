"""The two kinds of lab failure: bad input (exit 2) and a runtime failure (exit 1)."""

from __future__ import annotations


class LabInputError(ValueError):
    """Bad input (name, topology, arguments). ``str()`` is one line naming the field and the reason."""


class LabError(RuntimeError):
    """The lab could not be built, inspected or removed. ``str()`` is one line."""
