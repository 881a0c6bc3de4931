"""``magw.ops.gather.archive`` and ``runner``: every member is listed in the MANIFEST with its source, failures are
recorded and never fatal, outputs are redacted, the tarball appears only when complete."""

from __future__ import annotations

import json
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from magw.ops.gather.archive import MANIFEST, Archive
from magw.ops.gather.runner import Outcome, run


def fake_runner(answers: dict[str, Outcome]) -> Any:
    """A runner answering by the command's first word, with the command line it was given."""
    def runner(argv: Sequence[str], timeout: float) -> Outcome:
        return attrs.evolve(answers[argv[0]], argv=tuple(argv))

    return runner


def outcome(argv: str, *, out: bytes = b"", code: int | None = 0, error: str | None = None) -> Outcome:
    return Outcome(argv=(argv,), stdout=out, stderr=b"", code=code, seconds=0.01, error=error)


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        out = {}
        for info in tar.getmembers():
            f = tar.extractfile(info)
            assert f is not None
            out[info.name] = f.read()
        return out


def test_manifest_lists_each_member_with_its_source_and_the_failures(tmp_path: Path) -> None:
    """A good command, an empty one, a failing one with output, a missing tool and a timeout: each member is in
    the MANIFEST with the command line that made it; the three failures are under ``failed``."""
    runner = fake_runner({
        "good": outcome("good", out=b"hello\n"),
        "empty": outcome("empty"),
        "bad": outcome("bad", out=b"partial\n", code=1, error="exit 1: boom"),
        "missing": outcome("missing", code=None, error="missing tool: missing"),
        "slow": outcome("slow", code=None, error="timed out after 1 s"),
    })  # fmt: skip
    out = tmp_path / "g.tar.gz"
    a = Archive(out, "top", runner=runner)
    for name in ("good", "empty", "bad", "missing", "slow"):
        a.command(f"cmd/{name}.txt", (name, "--flag"))
    manifest = a.close({"mode": "test"})
    got = members(out)
    assert sorted(got) == ["top/MANIFEST.json", "top/cmd/bad.txt", "top/cmd/empty.txt", "top/cmd/good.txt"]
    assert got["top/cmd/good.txt"] == b"hello\n"
    assert got["top/cmd/empty.txt"] == b""
    assert json.loads(got[f"top/{MANIFEST}"]) == manifest
    sources = {f["path"]: f["source"] for f in manifest["files"]}
    assert sources == {"cmd/bad.txt": "bad --flag", "cmd/empty.txt": "empty --flag", "cmd/good.txt": "good --flag"}
    assert [(f["what"], f["error"]) for f in manifest["failed"]] == [
        ("cmd/bad.txt", "exit 1: boom"),
        ("cmd/missing.txt", "missing tool: missing"),
        ("cmd/slow.txt", "timed out after 1 s"),
    ]
    assert manifest["mode"] == "test"


def test_report_with_failing_exit_is_kept_without_failure_when_allowed(tmp_path: Path) -> None:
    """``failure_ok``: a report whose exit code says "a check failed" is a member, not a failure."""
    runner = fake_runner({"diag": outcome("diag", out=b'{"passed": false}', code=1, error="exit 1: x")})
    a = Archive(tmp_path / "g.tar.gz", "top", runner=runner)
    a.command("d.json", ("diag",), json_out=True, failure_ok=True)
    manifest = a.close({})
    assert manifest["failed"] == []
    assert [(f["path"], f["exit"]) for f in manifest["files"]] == [("d.json", 1)]


def test_outputs_and_files_are_redacted_and_counted(tmp_path: Path) -> None:
    """A command's output, a JSON output and a copied file lose their secrets; the MANIFEST counts them."""
    runner = fake_runner({
        "wg": outcome("wg", out=b"private key: c2VjcmV0a2V5\npublic key: pub\n"),
        "js": outcome("js", out=b'{"spec": {"ceIPSecPSK": "pskvalue"}}'),
    })  # fmt: skip
    log = tmp_path / "d.log"
    log.write_text('{"event": "x", "token": "tokvalue"}\n')
    out = tmp_path / "g.tar.gz"
    a = Archive(out, "top", runner=runner)
    a.command("wg.txt", ("wg",))
    a.command("obj.json", ("js",), json_out=True)
    a.copy_file("d.log", log)
    manifest = a.close({})
    blob = b"".join(members(out).values())
    for secret in (b"c2VjcmV0a2V5", b"pskvalue", b"tokvalue"):
        assert secret not in blob
    assert b"public key: pub" in blob
    assert manifest["redactions"] == 3
    assert {f["path"]: f["source"] for f in manifest["files"]}["d.log"] == f"file {log}"


def test_a_long_file_keeps_its_last_lines(tmp_path: Path) -> None:
    """Past the limit a copied file keeps its end, from a line start, and says it was truncated."""
    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i:04d}\n" for i in range(100)))
    out = tmp_path / "g.tar.gz"
    a = Archive(out, "top", runner=run)
    a.copy_file("big.log", log, limit=100)
    manifest = a.close({})
    text = members(out)["top/big.log"].decode()
    assert text.endswith("line 0099\n")
    assert text.startswith("line ")
    assert "line 0000" not in text
    assert manifest["files"][0]["truncated"] is True


def test_a_missing_file_is_a_failure_not_an_error(tmp_path: Path) -> None:
    a = Archive(tmp_path / "g.tar.gz", "top", runner=run)
    a.copy_file("x.log", tmp_path / "nope.log")
    manifest = a.close({})
    assert manifest["files"] == []
    assert [f["what"] for f in manifest["failed"]] == ["x.log"]


def test_abort_leaves_no_file(tmp_path: Path) -> None:
    """An interrupted gather leaves neither the tarball nor its temporary file."""
    a = Archive(tmp_path / "g.tar.gz", "top", runner=run)
    a.add_text("x.txt", "x", source="test")
    a.abort()
    assert list(tmp_path.iterdir()) == []


def test_real_runner_records_missing_tool_timeout_and_exit() -> None:
    """The subprocess runner: a tool that is not installed, a command past its timeout and a non-zero exit are
    outcomes with a one-line error, never exceptions; stdout is kept."""
    missing = run(("magw-no-such-tool-xyz",), 5.0)
    assert (missing.code, missing.error) == (None, "missing tool: magw-no-such-tool-xyz")
    slow = run((sys.executable, "-c", "import time; time.sleep(30)"), 0.5)
    assert (slow.code, slow.error) == (None, "timed out after 0.5 s")
    bad = run((sys.executable, "-c", "import sys; print('out'); sys.exit('why')"), 30.0)
    assert (bad.code, bad.error, bad.stdout) == (1, "exit 1: why", b"out\n")
    env = run((sys.executable, "-c", "import os; print(os.environ['WG_HIDE_KEYS'])"), 30.0)
    assert env.stdout == b"always\n"
