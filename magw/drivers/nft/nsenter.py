"""Run a block of code with the current THREAD inside a named network namespace.

``setns(2)`` with ``CLONE_NEWNET`` moves only the calling thread, so other threads
of the process (the asyncio loop, metrics) stay where they are. We never create a
namespace: a missing ``/var/run/netns/NAME`` raises ``NoSuchNetns``. The thread
always returns to the namespace it came from, also when the block raises.

Python 3.11 has no ``os.setns`` (added in 3.12), hence the libc call.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator

NETNS_DIR = "/var/run/netns"
_CLONE_NEWNET = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.setns.restype = ctypes.c_int


class NoSuchNetns(LookupError):
    """The named network namespace does not exist (we never create one)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no such network namespace: {name}")
        self.name = name


def netns_path(name: str) -> str:
    """The bind-mount of ``name`` (as ``ip netns add`` makes it); raises NoSuchNetns if it is missing."""
    if "/" in name or name in ("", ".", ".."):
        raise NoSuchNetns(name)
    path = os.path.join(NETNS_DIR, name)
    if not os.path.exists(path):
        raise NoSuchNetns(name)
    return path


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """Run the block with this thread in namespace ``name`` (None: stay where we are)."""
    if name is None:
        yield
        return
    try:
        target = os.open(netns_path(name), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError as exc:  # removed between the check and the open
        raise NoSuchNetns(name) from exc
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(target)
        os.close(home)
