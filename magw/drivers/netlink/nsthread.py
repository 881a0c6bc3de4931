"""Run a function inside a named network namespace, in a short-lived thread.

``setns(2)`` with CLONE_NEWNET moves only the calling thread. We call it in a
fresh thread that ends right after the function returns, so the caller's own
threads never change namespace, even if something goes wrong halfway. Python
3.11 has no ``os.setns``, hence ctypes. A namespace that does not exist is an
error (NoSuchNetns): we never create one.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from typing import TypeVar

from magw.drivers.netlink.session import NETNS_DIR, check_netns

T = TypeVar("T")

_CLONE_NEWNET = 0x40000000


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def run_in_netns(netns: str | None, fn: Callable[[], T]) -> T:
    """``fn()`` evaluated inside ``netns`` (None: right here, in the current namespace)."""
    if netns is None:
        return fn()
    check_netns(netns)
    result: list[T] = []
    error: list[BaseException] = []

    def worker() -> None:
        try:
            _setns(os.path.join(NETNS_DIR, netns))
            result.append(fn())
        except BaseException as exc:  # handed to the caller's thread below
            error.append(exc)

    thread = threading.Thread(target=worker, name=f"netns-{netns}", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
