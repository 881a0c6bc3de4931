"""Where the repository's files are, for tests at any depth of tests/ (no test counts ``.parent`` hops)."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
EXAMPLES = REPO / "examples"
DEPLOY = REPO / "deploy"
