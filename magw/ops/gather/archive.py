"""The tarball ``magw gather`` writes, member by member, and its MANIFEST.

Every member is redacted on the way in (``magw.ops.gather.redact``) and recorded with where it came from: the
command line that printed it (``source``), or the file it was copied from, or ``magw`` for a document this process
made. A command that failed, timed out or whose tool is missing is recorded under ``failed`` (with its output as a
member when it printed any). ``MANIFEST.json`` is written last; the tarball appears under its name only when it is
complete (temp file + rename).
"""

from __future__ import annotations

import io
import json
import os
import shlex
import tarfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from magw.ops.gather.redact import redact_doc, redact_text
from magw.ops.gather.runner import DEFAULT_TIMEOUT, Outcome, Runner, run

MANIFEST = "MANIFEST.json"
FILE_LIMIT = 8 * 1024 * 1024  # bytes of a copied file or a command's output: the last ones are kept (logs grow)


def command_text(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def _tail(data: bytes, limit: int) -> tuple[bytes, bool]:
    if len(data) <= limit:
        return data, False
    cut = data[-limit:]
    newline = cut.find(b"\n")
    return (cut[newline + 1 :] if 0 <= newline < 4096 else cut), True


class Archive:
    """A tarball being written at ``path``, every member under the directory ``top``."""

    def __init__(self, path: Path, top: str, *, runner: Runner = run, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = path
        self.top = top
        self.runner = runner
        self.timeout = timeout
        self.files: list[dict[str, Any]] = []
        self.failed: list[dict[str, Any]] = []
        self._names: set[str] = set()
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self._tar = tarfile.open(self._tmp, "w:gz")  # noqa: SIM115 (closed by close() or abort())

    # -- members -----------------------------------------------------------------------------------------

    def _add(self, member: str, data: bytes) -> None:
        if member in self._names:
            raise ValueError(f"gather: member {member} written twice")
        self._names.add(member)
        info = tarfile.TarInfo(f"{self.top}/{member}")
        info.size = len(data)
        info.mtime = int(time.time())
        info.mode = 0o644
        self._tar.addfile(info, io.BytesIO(data))

    def add_text(self, member: str, text: str, *, source: str, **extra: Any) -> None:
        clean, hits = redact_text(text)
        data = clean.encode()
        self._add(member, data)
        self.files.append({"path": member, "source": source, "bytes": len(data), "redactions": hits, **extra})

    def add_doc(self, member: str, doc: Any, *, source: str, **extra: Any) -> None:
        clean, hits = redact_doc(doc)
        data = (json.dumps(clean, indent=2, sort_keys=True, default=str) + "\n").encode()
        self._add(member, data)
        self.files.append({"path": member, "source": source, "bytes": len(data), "redactions": hits, **extra})

    def fail(self, what: str, source: str, error: str) -> None:
        """Something that could not be collected (no member)."""
        self.failed.append({"what": what, "source": source, "error": redact_text(error)[0]})

    # -- sources -----------------------------------------------------------------------------------------

    def command(self, member: str, argv: Sequence[str], *, timeout: float | None = None, json_out: bool = False,
                failure_ok: bool = False) -> Outcome:  # fmt: skip
        """Run ``argv``; its output (stdout) becomes ``member`` (``record``)."""
        outcome = self.runner(argv, self.timeout if timeout is None else timeout)
        self.record(member, outcome, json_out=json_out, failure_ok=failure_ok)
        return outcome

    def record(self, member: str, outcome: Outcome, *, json_out: bool = False, failure_ok: bool = False,
               **notes: Any) -> None:  # fmt: skip
        """A finished command's output (stdout) as ``member``. ``json_out``: parsed and redacted as a document
        (kept as text when it is not JSON). ``failure_ok``: a non-zero exit with output is not a failure (a
        report whose exit code says "some check failed"). A command that ran and printed nothing still gets its
        (empty) member: the reader sees it ran. ``notes``: more fields of its MANIFEST entry."""
        source = command_text(outcome.argv)
        extra: dict[str, Any] = {"seconds": round(outcome.seconds, 3), **notes}
        if outcome.code is not None:
            extra["exit"] = outcome.code
        failed = outcome.error is not None and not (failure_ok and outcome.code is not None and outcome.stdout)
        if failed:
            extra["error"] = redact_text(outcome.error or "")[0]
            self.failed.append({"what": member, "source": source, "error": extra["error"]})
        if outcome.stdout or (outcome.code is not None and not failed):
            data, truncated = _tail(outcome.stdout, FILE_LIMIT)
            if truncated:
                extra["truncated"] = True
            text = data.decode("utf-8", "replace")
            doc = _json(text) if json_out else None
            if doc is not None:
                self.add_doc(member, doc, source=source, **extra)
            else:
                self.add_text(member, text, source=source, **extra)

    def copy_file(self, member: str, path: Path, *, limit: int = FILE_LIMIT) -> None:
        """The last ``limit`` bytes of text file ``path``, redacted."""
        try:
            with path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - limit - 4096))
                raw = f.read()
        except OSError as exc:
            self.fail(member, f"file {path}", exc.strerror or type(exc).__name__)
            return
        data, truncated = _tail(raw, limit)
        extra = {"truncated": True} if truncated or size > len(raw) else {}
        self.add_text(member, data.decode("utf-8", "replace"), source=f"file {path}", **extra)

    # -- end ---------------------------------------------------------------------------------------------

    def close(self, head: dict[str, Any]) -> dict[str, Any]:
        """Write the MANIFEST (``head`` plus the files and failures) and move the tarball to its name."""
        manifest = {
            **head,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": sorted(self.files, key=lambda f: str(f["path"])),
            "failed": self.failed,
            "redactions": sum(int(f.get("redactions", 0)) for f in self.files),
        }
        self._add(MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
        self._tar.close()
        os.replace(self._tmp, self.path)
        return manifest

    def abort(self) -> None:
        self._tar.close()
        self._tmp.unlink(missing_ok=True)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
