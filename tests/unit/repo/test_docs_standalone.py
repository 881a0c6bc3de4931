"""The docs stand alone: README.md and docs/*.md make sense to someone who has only this repository.

They name no design or style file kept outside it, and every Markdown link to
another page points to a file in the repository.
"""

from __future__ import annotations

import re

from tests.support.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
OUTSIDE = re.compile(r"seeds/|DESIGN(\.md)?\b|shared/|STYLE(\.md)?\b|/work/")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_no_page_cites_a_file_outside_the_repository() -> None:
    """No page points the reader at seeds/, DESIGN.md, shared/, STYLE.md or another checkout's path."""
    found = [
        f"{page.relative_to(REPO)}:{n}: {line.strip()}"
        for page in PAGES
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []


def test_every_relative_link_resolves_in_the_repository() -> None:
    """``[text](page.md)`` links resolve relative to their page, to a file that exists here."""
    broken = [
        f"{page.relative_to(REPO)}: {target}"
        for page in PAGES
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert broken == []
