"""The versions a bug report needs: magw (and which tree it runs from), the kernel and every tool magw drives.

Each tool is asked by its own command (recorded in the MANIFEST); a missing one is ``not found``, not a failure of
the gather. ``versions.json`` holds one line per component, the first line the tool printed.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

from magw import __version__
from magw.ops.gather.archive import Archive, command_text

# component -> the command that prints its version (stdout or stderr: keepalived and conntrackd use stderr)
TOOLS: dict[str, tuple[str, ...]] = {
    "iproute2": ("ip", "-V"),
    "nft": ("nft", "--version"),
    "ovn-nbctl": ("ovn-nbctl", "--version"),
    "ovs-vsctl": ("ovs-vsctl", "--version"),
    "keepalived": ("keepalived", "--version"),
    "conntrackd": ("conntrackd", "-v"),
    "conntrack": ("conntrack", "--version"),
    "wireguard-go": ("wireguard-go", "--version"),
    "wg": ("wg", "--version"),
}


def magw_tree() -> Path:
    import magw

    return Path(magw.__file__).resolve().parent.parent


def _first(data: bytes) -> str:
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def collect_versions(archive: Archive) -> dict[str, Any]:
    """``versions.json``: magw, Python, the kernel and each tool; returns the document."""
    tree = magw_tree()
    doc: dict[str, Any] = {
        "magw": {"version": __version__, "tree": str(tree)},
        "python": {"version": sys.version.split()[0]},
        "kernel": {"version": platform.release(), "uname": " ".join(platform.uname())},
    }
    if (tree / ".git").exists():
        git = ("git", "-C", str(tree), "describe", "--always", "--dirty", "--tags")
        outcome = archive.runner(git, archive.timeout)
        doc["magw"]["git"] = _first(outcome.stdout) if outcome.ok else None
        doc["magw"]["git_command"] = command_text(git)
    for name, argv in TOOLS.items():
        outcome = archive.runner(argv, archive.timeout)
        line = _first(outcome.stdout) or _first(outcome.stderr)
        entry: dict[str, Any] = {"command": command_text(argv)}
        if outcome.code is None:
            entry["version"] = "not found" if (outcome.error or "").startswith("missing tool") else None
            entry["error"] = outcome.error
        else:
            entry["version"] = line or None
        doc[name] = entry
    archive.add_doc("versions.json", doc, source="magw (each component's own command: see its 'command')")
    return doc
