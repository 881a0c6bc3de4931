"""One command of a transition and how it went."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class Step:
    """One client command and how it went (the agent logs these; a failed step does not stop the next)."""

    option: str
    returncode: int
    output: str
