"""What a failed ``up`` leaves for a person to read: a copy of the lab's files, made before ``down`` removes them.

A failed ``up`` removes everything it built (``lifecycle.up``), its state directory ``/run/magw-lab/<name>/``
too, and the error that ended it points into that directory ("see .../logs", a route agent's status file, a
daemon's log). So the files are copied first, once ``down`` has stopped every process (the logs are whole),
to ``<temp dir>/magw-lab-<name>-failed-<UTC time>/`` with the same layout (``logs/``, ``status/``,
``broker/``, ``state.json``, ...; only regular files: no sockets), and the error's paths are made to point
there (``repoint``). Nobody removes the copy but the person who reads it.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

KEPT_PREFIX = "magw-lab-"


def kept_dir(name: str, now: datetime | None = None) -> Path:
    """Where the files of lab ``name``'s failed ``up`` go: a directory that does not exist yet."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    base = Path(tempfile.gettempdir()) / f"{KEPT_PREFIX}{name}-failed-{stamp}"
    path, n = base, 1
    while path.exists():  # a second failed up of that lab within the second
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def keep_files(source: Path, target: Path) -> int:
    """Copy every regular file under ``source`` to the same place under ``target``; how many were copied. A file
    that cannot be read or written is skipped (what is left is still worth reading)."""
    copied = 0
    for path in sorted(source.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        dest = target / path.relative_to(source)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
        except OSError:
            continue
        copied += 1
    return copied


def repoint(message: str, source: Path, target: Path) -> str:
    """``message`` with every path in ``source`` made the same path in ``target``."""
    return re.sub(re.escape(str(source)) + r"(?![\w.-])", lambda _m: str(target), message)
