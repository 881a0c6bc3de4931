"""``magw diagnose`` as part of a gather: run as its own process (``python -m magw.cli.main diagnose ... --json``),
its JSON report kept whatever it says.

``diagnose`` grows its topics and flags (docs/diagnose.md); the gather asks for the fullest report first and falls
back: a usage error (exit 2: a topic or flag this build does not have) tries the next form, any other exit keeps
the report (exit 1 means "a check failed", which is what a bug report wants to see). The MANIFEST records the
command that made the report, every form refused, and which magw build ran it (``diagnose/BUILD.txt``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from magw import __version__
from magw.ops.gather.archive import Archive, command_text
from magw.ops.gather.versions import magw_tree

USAGE = 2
DIAGNOSE_TIMEOUT = 180.0  # a whole lab's checks probe every cable: minutes on a loaded machine


def magw_argv(*args: str) -> tuple[str, ...]:
    """The magw command line of this installation (the same interpreter, so the same build)."""
    return (sys.executable, "-m", "magw.cli.main", *args)


def lab_forms(lab: str) -> tuple[tuple[str, ...], ...]:
    return (magw_argv("diagnose", "all", "--lab", lab, "--json"),)


def node_forms(netns: str | None) -> tuple[tuple[str, ...], ...]:
    ns = ("--netns", netns) if netns else ()
    return (magw_argv("diagnose", "all", *ns, "--json"), magw_argv("diagnose", "kernel", *ns, "--json"))


def run_diagnose(archive: Archive, member: str, forms: Sequence[Sequence[str]], *, refused: Sequence[str] = (),
                 timeout: float = DIAGNOSE_TIMEOUT) -> list[str] | None:  # fmt: skip
    """The first form that is not a usage error, its report into ``member`` (its MANIFEST entry lists the forms
    refused before it, ``refused`` first); None when it ran, else the forms refused (the caller records the
    failure or tries another way)."""
    tried = list(refused)
    for argv in forms:
        outcome = archive.runner(argv, timeout)
        if outcome.code == USAGE:
            tried.append(f"{command_text(argv)} ({outcome.error})")
            continue
        notes = {"refused_forms": tried} if tried else {}
        archive.record(member, outcome, json_out=True, failure_ok=True, **notes)
        return None
    return tried


def diagnose_node(archive: Archive, member: str, netns: str | None, *, refused: Sequence[str] = ()) -> None:
    """``member``: ``magw diagnose`` of one node, in its fullest form this build has; a failure when none runs."""
    still = run_diagnose(archive, member, node_forms(netns), refused=refused)
    if still is not None:
        archive.fail(member, "magw diagnose", f"every form was refused as a usage error: {'; '.join(still)}")


def build_note() -> str:
    """Which magw ran ``diagnose``: its version, source tree and interpreter."""
    return f"magw {__version__} from {magw_tree()} ({sys.executable})"
