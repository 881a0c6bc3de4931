"""The inotify watch of the broker directory (magw.sources.file.dirwatch) against the real kernel: which events
wake the broker, and a watch that is lost when its directory goes."""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from magw.sources.file.dirwatch import IN_ATTRIB, IN_MOVED_TO, IN_Q_OVERFLOW, DirWatch, Drained, _parse

SUFFIXES = (".yaml", ".yml")


@pytest.fixture
def watch(tmp_path: Path) -> Iterator[DirWatch]:
    w = DirWatch(tmp_path, SUFFIXES)
    try:
        yield w
    finally:
        w.close()


def test_nothing_happened_nothing_read(watch: DirWatch) -> None:
    assert watch.drain() == Drained()


def test_a_temp_file_and_other_names_are_not_relevant(tmp_path: Path, watch: DirWatch) -> None:
    (tmp_path / ".endpoint-a@b.yaml.tmp").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "sub").mkdir()
    assert watch.drain() == Drained()


@pytest.mark.parametrize("action", ["rename", "write in place", "delete"])
def test_each_change_of_a_document_is_relevant(tmp_path: Path, watch: DirWatch, action: str) -> None:
    doc = tmp_path / "node-a.yaml"
    doc.write_text("{}")
    watch.drain()
    if action == "rename":
        (tmp_path / ".node-a.yaml.tmp").write_text("{kind: Node}")
        os.rename(tmp_path / ".node-a.yaml.tmp", doc)
    elif action == "write in place":
        doc.write_text("{kind: Node}")
    else:
        doc.unlink()
    assert watch.drain() == Drained(relevant=True)


def test_the_directory_removed_loses_the_watch(tmp_path: Path) -> None:
    directory = tmp_path / "broker"
    directory.mkdir()
    w = DirWatch(directory, SUFFIXES)
    try:
        directory.rmdir()
        assert w.drain() == Drained(relevant=True, lost=True)
    finally:
        w.close()


def test_no_directory_is_an_oserror_the_broker_can_tell_apart(tmp_path: Path) -> None:
    with pytest.raises(OSError) as missing:
        DirWatch(tmp_path / "nowhere", SUFFIXES)
    assert missing.value.errno == errno.ENOENT
    (tmp_path / "file.yaml").write_text("{}")
    with pytest.raises(OSError) as not_a_dir:
        DirWatch(tmp_path / "file.yaml", SUFFIXES)
    assert not_a_dir.value.errno == errno.ENOTDIR


def event(mask: int, name: bytes = b"") -> bytes:
    padded = name.ljust(16, b"\0") if name else b""  # the kernel pads a name with NULs (names here are short)
    return struct.pack("iIII", 1, mask, 0, len(padded)) + padded


def test_parse_an_overflow_and_a_truncated_buffer_count_as_relevant() -> None:
    assert _parse(event(IN_ATTRIB, b"notes.txt"), SUFFIXES) == (False, False)
    assert _parse(event(IN_ATTRIB, b"notes.txt") + event(IN_MOVED_TO, b"a.yaml"), SUFFIXES) == (True, False)
    assert _parse(event(IN_Q_OVERFLOW), SUFFIXES) == (True, False)  # events were lost: look
    assert _parse(event(IN_ATTRIB, b"notes.txt")[:-3], SUFFIXES) == (True, False)  # never sent by the kernel


def test_a_touch_is_relevant_only_for_the_names_asked_for(tmp_path: Path, watch: DirWatch) -> None:
    """A heartbeat of a fresh Endpoint file does not wake the broker; one of a stale file (``touch_wakes``) does."""
    (tmp_path / "endpoint-a@fresh.yaml").write_text("{}")
    (tmp_path / "endpoint-a@stale.yaml").write_text("{}")
    watch.drain()
    os.utime(tmp_path / "endpoint-a@fresh.yaml")
    assert watch.drain(frozenset({"endpoint-a@stale.yaml"})) == Drained()
    os.utime(tmp_path / "endpoint-a@stale.yaml")
    assert watch.drain(frozenset({"endpoint-a@stale.yaml"})) == Drained(relevant=True)
