"""Linux inotify on the broker directory: tells the file broker *that* a document may have changed.

The broker used to list its directory every 30 ms, and on an idle lab that polling was half of a route agent's CPU
and almost all of a gateway daemon's (docs/performance.md, "Where an idle daemon's CPU goes"). With a watch, the
broker lists the directory when the kernel reports an event on a document's name, plus a slow full pass for what
inotify cannot report (docs/filebroker.md, "Watching").

This module only wakes the broker; the broker's pass still decides what changed, from the listing and the file
stamps, as before. An event is *relevant* when it names a document (a name the broker reads: not a dot-file, ending
in ``.yaml`` or ``.yml``; ``write_atomic``'s temp files are dot-files, so only its final rename counts), or when it
names nothing (the queue overflowed: events were lost). The watch is *lost* when the directory itself was removed,
moved or unmounted; the broker then arms a new one.

A touch alone (IN_ATTRIB: the gateways' heartbeat, once a second each) is relevant only for the files the broker
names in ``touch_wakes``: the stale ones, whose touch brings their Endpoint back. A touch of a fresh file changes
nothing the broker would act on before its next pass (the file's mtime is read then, and the broker's TTL timer
is set from it), so it does not cost a pass of its own: with a dozen gateways that was a dozen passes a second.

No dependency: ``inotify_init1`` and ``inotify_add_watch`` through ctypes from the C library (the interpreter's),
events read with ``os.read`` from a non-blocking descriptor (the broker hands it to the event loop's ``add_reader``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import struct

import attrs

# <sys/inotify.h>
IN_ATTRIB = 0x00000004  # a touch (the gateways' heartbeat) and chmod
IN_CLOSE_WRITE = 0x00000008  # a writer that wrote in place closed the file
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080  # write_atomic's rename
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000  # the watch is gone (the directory was removed or unmounted)
IN_ONLYDIR = 0x01000000
IN_EXCL_UNLINK = 0x04000000

# IN_MODIFY is left out on purpose: a writer that writes in place is seen at IN_CLOSE_WRITE, complete, instead of
# at its open(O_TRUNC) with an empty file and then once per write() with half of one. (A file changed without an
# open for writing, by truncate(2) or through a shared mmap, is seen at the next slow full pass.)
MASK = (
    IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
)
LOST = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (of the name that follows, NUL-padded)
_READ_SIZE = 64 * 1024  # about 2,000 events with document-sized names per read


@attrs.frozen
class Drained:
    """What one ``drain()`` read: ``relevant``, the broker should look; ``lost``, the watch must be armed again."""

    relevant: bool = False
    lost: bool = False


@functools.cache
def _libc() -> ctypes.CDLL:
    # The interpreter's own symbols, libc's among them: ctypes.util.find_library would run ldconfig in a
    # subprocess (13 ms here), on the event loop's thread.
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "inotify_init1"):
        raise OSError(errno.ENOSYS, "the C library has no inotify")
    return libc


def is_document_name(name: str, suffixes: tuple[str, ...]) -> bool:
    """The names the broker reads (the same rule as its listing)."""
    return not name.startswith(".") and name.endswith(suffixes)


class DirWatch:
    """One inotify instance watching one directory; ``fd`` is non-blocking and close-on-exec."""

    def __init__(self, directory: str | os.PathLike[str], suffixes: tuple[str, ...]) -> None:
        """Raises OSError: ENOENT/ENOTDIR (no directory yet), EMFILE (the user's inotify instances are used up),
        ENOSPC (its watches are), ENOSYS (no inotify)."""
        self._suffixes = suffixes
        libc = _libc()
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        wd = libc.inotify_add_watch(fd, os.fsencode(directory), MASK | IN_ONLYDIR | IN_EXCL_UNLINK)
        if wd < 0:
            err = ctypes.get_errno()
            os.close(fd)
            raise OSError(err, f"inotify_add_watch {os.fspath(directory)}: {os.strerror(err)}")
        self.fd: int = fd

    def drain(self, touch_wakes: frozenset[str] = frozenset()) -> Drained:
        """Read every queued event (never blocks); a touch alone is relevant for the names in ``touch_wakes``."""
        relevant = lost = False
        while True:
            try:
                buf = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                break
            if not buf:
                break
            relevant_here, lost_here = _parse(buf, self._suffixes, touch_wakes)
            relevant, lost = relevant or relevant_here, lost or lost_here
        return Drained(relevant=relevant or lost, lost=lost)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def _parse(buf: bytes, suffixes: tuple[str, ...], touch_wakes: frozenset[str] = frozenset()) -> tuple[bool, bool]:
    """(relevant, lost) of the events in ``buf``; a truncated tail (never sent by the kernel) counts as relevant."""
    relevant = lost = False
    offset = 0
    while offset + _HEADER.size <= len(buf):
        _wd, mask, _cookie, length = _HEADER.unpack_from(buf, offset)
        offset += _HEADER.size
        raw = buf[offset : offset + length]
        offset += length
        if mask & LOST:
            lost = True
        name = os.fsdecode(raw.rstrip(b"\0"))
        overflow_or_directory = mask & IN_Q_OVERFLOW or not name
        if overflow_or_directory or (is_document_name(name, suffixes) and (mask & ~IN_ATTRIB or name in touch_wakes)):
            relevant = True
    if offset != len(buf):
        relevant = True
    return relevant, lost
