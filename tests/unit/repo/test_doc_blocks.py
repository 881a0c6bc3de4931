"""The command blocks of README.md and docs/*.md marked runnable work as written, and from another directory.

The marking: an HTML comment on the line right before a fenced ``sh`` block::

    <!-- runnable -->
    ```sh
    .venv/bin/magw plan --snapshot examples/seed-east.yaml --node e-w1
    ```

``<!-- runnable: needs jq -->`` names tools outside the virtualenv the block needs (skipped when missing).
Only blocks that are quick and change nothing outside the test are marked: ``plan``, ``ovn plan``, bad-input
examples (``... || echo "exit $?"``), never a lab, a daemon or root.

How a block runs: as one ``bash`` script with ``set -e -o pipefail`` (a failing command fails the block), the
virtualenv's ``bin`` first on PATH, and as current directory a scratch directory, not the repository's root.
The docs name the repository's files by relative paths (``.venv/bin/magw``, ``examples/...``), as a reader
in a checkout types them, so the scratch directory holds symlinks to the repository's top-level entries, all
but the ``magw`` package and ``tests``: a command that works only because Python imports ``magw`` from the
current directory fails here. A block must also print something (an example whose output is empty, as a jq
filter that selects nothing, shows nothing). A failure names the page and line, and shows the block and its
output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import attrs
import pytest

from tests.support.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARK = re.compile(r"^<!-- runnable(?:: needs (?P<needs>[\w ,-]+))? -->$")
NOT_MIRRORED = {"magw", "tests", ".git"}  # the package itself is reached only through the virtualenv
VENV_BIN = REPO / ".venv" / "bin"
BLOCK_TIMEOUT = 60.0
# Code blocks that start a console script of magw (or Python, pytest) through sudo by bare name: sudo searches
# its secure_path, never .venv/bin. And magw's modules run by a bare python, which finds them only from the root.
SUDO_BARE = re.compile(r"\bsudo\s+(?:-\S+\s+)*(magw[-\w]*|python3?|pytest)\b")
BARE_PYTHON_MAGW = re.compile(r"(?<![/\w.-])python3?\s+-m\s+magw\b")


@attrs.frozen
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    needs: tuple[str, ...]
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _marked(path: Path) -> tuple[list[Block], list[str]]:
    """The runnable blocks of one page, and the problems of its markers (a marker not before a ``sh`` block)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = str(path.relative_to(REPO))
    blocks: list[Block] = []
    problems: list[str] = []
    for i, line in enumerate(lines):
        found = MARK.match(line.strip())
        if found is None:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```sh":
            problems.append(f"{page}:{i + 1}: a runnable marker must be right before a ```sh block")
            continue
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            problems.append(f"{page}:{i + 2}: the runnable block is never closed")
            continue
        needs = tuple(t.strip() for t in (found["needs"] or "").split(",") if t.strip())
        blocks.append(Block(page=page, line=i + 2, needs=needs, text="\n".join(lines[i + 2 : end]) + "\n"))
    return blocks, problems


def runnable_blocks() -> list[Block]:
    return [block for page in PAGES for block in _marked(page)[0]]


def code_lines() -> list[tuple[str, str]]:
    """(page:line, text) of every line inside a fenced block of every page."""
    found = []
    for page in PAGES:
        inside = False
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                inside = not inside
            elif inside:
                found.append((f"{page.relative_to(REPO)}:{n}", line))
    return found


def test_markers_sit_on_sh_blocks_and_the_pages_keep_theirs() -> None:
    """Every marker is right before a closed ```sh block, and the pages with a quick look keep a runnable one:
    a marker that silently stopped matching would make the next test pass without running anything."""
    assert [p for page in PAGES for p in _marked(page)[1]] == []
    pages = {block.page for block in runnable_blocks()}
    assert {"README.md", "docs/cli.md", "docs/planner.md", "docs/ovn.md"} <= pages


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch directory with the repository's top-level entries as symlinks, but not its ``magw`` package."""
    scratch = tmp_path_factory.mktemp("reader")
    for entry in REPO.iterdir():
        if entry.name not in NOT_MIRRORED:
            (scratch / entry.name).symlink_to(entry)
    return scratch


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda b: b.where)
def test_runnable_block_works_as_written_from_another_directory(block: Block, elsewhere: Path) -> None:
    """The block, unchanged, run by bash from a scratch directory with .venv/bin first on PATH, exits 0 and
    prints something; else the failure shows the block, its exit code and its output."""
    missing = [tool for tool in block.needs if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{block.where} needs {', '.join(missing)}, not installed here")
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)  # the reader's shell has none; magw comes from the virtualenv
    out = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.text],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT,
    )  # fmt: skip
    if out.returncode != 0 or not out.stdout.strip():
        what = f"exited {out.returncode}" if out.returncode else "printed nothing"
        pytest.fail(
            f"{block.where}: the runnable block {what} (run from {elsewhere}):\n{block.text}"
            f"--- stdout:\n{out.stdout}--- stderr:\n{out.stderr}",
            pytrace=False,
        )


def test_no_code_block_relies_on_the_repository_root_or_a_search_path_sudo_lacks() -> None:
    """No command in a code block runs magw's console scripts (or python, pytest) through ``sudo`` by bare name
    (sudo's secure_path has no .venv/bin), and none runs magw's modules with a bare ``python3 -m magw...``, which
    imports magw only when the current directory is the repository's root: ``.venv/bin/python -m ...``."""
    bad = [f"{where}: {text.strip()}" for where, text in code_lines() if SUDO_BARE.search(text)]
    bad += [f"{where}: {text.strip()}" for where, text in code_lines() if BARE_PYTHON_MAGW.search(text)]
    assert bad == []
